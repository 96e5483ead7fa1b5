package diagnosis

import (
	"bytes"
	"encoding/binary"
)

// infoTag starts the message of an NCCL INFO line
// ("host:pid:tid [dev] NCCL INFO <message>").
var infoTag = []byte("NCCL INFO ")

// infoTag8 is infoTag's first 8 bytes as a little-endian word.
var infoTag8 = binary.LittleEndian.Uint64(infoTag)

// isNoiseKind reports whether message m (what follows "NCCL INFO ") starts
// like one of the NCCL INFO messages a healthy job prints by the thousand:
// the per-channel, ring and tree connection lines of every communicator's
// set-up, the per-collective lines of NCCL_DEBUG_SUBSYS=COLL, and the
// per-communicator summaries that a healthy set-up prints. No failure
// pattern of the catalog matches one of them (TestNoiseNeverAFailureLine
// checks every sample and every corpus line); some are marker lines ("via
// NET/", "nNodes"), whose loss under pressure only leaves a marker unseen
// for a while. One channel line is not noise: a receive through the network
// without GPUDirect RDMA ("[receive] via NET/IB/0", no "/GDRDMA") is what
// gpudirect's mixed pattern looks for.
//
// The kinds are told apart by the message's first eight bytes as one word
// (one comparison for a channel line, nearly all of a burst), then the rest
// of the kind's start; TestNoiseKinds checks it against the list of starts.
func isNoiseKind(m []byte) bool {
	if len(m) < 8 {
		for _, k := range noiseStarts {
			if hasPrefix(m, k) {
				return true // "Ring ", "Trees ", "comm 0x": no channel line is that short
			}
		}
		return false
	}
	switch w := binary.LittleEndian.Uint64(m); w {
	case wChannel:
		return !netReceiveWithoutGDR(m)
	case wConnecte:
		return hasPrefix(m, "Connected all ")
	case wThreadTh:
		return hasPrefix(m, "threadThresholds ")
	case wP2PChun:
		return hasPrefix(m, "P2P Chunksize")
	case wNcclCom:
		return hasPrefix(m, "ncclCommInitRank comm ")
	case wSetting:
		return hasPrefix(m, "Setting affinity for GPU ")
	case wNetIB:
		return hasPrefix(m, "NET/IB : Using [")
	case wGPUDire:
		return hasPrefix(m, "GPU Direct RDMA Enabled ")
	default:
		switch {
		case w&mask7 == wComm0x, w&mask6 == wTrees, w&mask5 == wRing:
			return true
		case '0' <= m[0] && m[0] <= '9':
			return bytes.Contains(m, collChannels)
		}
		// "<collective>: opCount"
		i := bytes.IndexByte(m[:min(len(m), 16)], ':')
		return i > 0 && hasPrefix(m[i:], ": opCount") && opCollective[string(m[:i])]
	}
}

// noiseStarts are the starts isNoiseKind looks for (with "N coll
// channels, ..." apart: it starts with a number).
var noiseStarts = []string{
	"Channel ", "Ring ", "Trees ", "Connected all ", "threadThresholds ",
	"P2P Chunksize", "comm 0x", "ncclCommInitRank comm ",
	"Setting affinity for GPU ", "NET/IB : Using [", "GPU Direct RDMA Enabled ",
	"AllReduce: opCount", "AllGather: opCount", "ReduceScatter: opCount",
	"Broadcast: opCount", "Reduce: opCount", "Send: opCount", "Recv: opCount",
	"AllToAll: opCount",
}

const (
	mask5 = 1<<40 - 1
	mask6 = 1<<48 - 1
	mask7 = 1<<56 - 1

	// The first eight bytes of the kinds as little-endian words
	// (TestNoiseKindWords checks them against the strings).
	wChannel  = 0x206c656e6e616843 // "Channel "
	wConnecte = 0x657463656e6e6f43 // "Connecte"
	wThreadTh = 0x6854646165726874 // "threadTh"
	wP2PChun  = 0x6e75684320503250 // "P2P Chun"
	wNcclCom  = 0x6d6d6f436c63636e // "ncclComm"
	wSetting  = 0x20676e6974746553 // "Setting "
	wNetIB    = 0x3a2042492f54454e // "NET/IB :"
	wGPUDire  = 0x6572694420555047 // "GPU Dire"
	wComm0x   = 0x007830206d6d6f63 // "comm 0x"
	wTrees    = 0x0000207365657254 // "Trees "
	wRing     = 0x00000020676e6952 // "Ring "
	wShared   = 0x6465726168532f00 // "?/Shared": the last eight bytes of a line ending in "/Shared"
)

var opCollective = map[string]bool{"AllReduce": true, "AllGather": true, "ReduceScatter": true,
	"Broadcast": true, "Reduce": true, "Send": true, "Recv": true, "AllToAll": true}

func hasPrefix(m []byte, p string) bool { return len(m) >= len(p) && string(m[:len(p)]) == p }

// Noise reports whether line is NCCL INFO noise: an NCCL INFO line of one
// of the kinds a healthy job prints by the thousand (channel, ring and tree
// connections, per-collective traces). A supervisor whose diagnosis falls
// behind a burst of output may shed these lines and must keep every other
// one: every WARN line, every error, every other INFO line. It costs two
// searches for an 'N' and a few word comparisons (no allocation) and is
// safe for concurrent use.
func Noise(line []byte) bool {
	// The first "NCCL " must be "NCCL INFO ", and no second one may follow
	// (lines of two processes glued together, with no newline between
	// them: the other line may be a WARN).
	i := nccl(line)
	if i < 0 || len(line)-i <= len(infoTag) || binary.LittleEndian.Uint64(line[i:]) != infoTag8 || line[i+8] != 'O' || line[i+9] != ' ' {
		return false
	}
	m := line[i+len(infoTag):]
	return isNoiseKind(m) && nccl(m) < 0
}

// Shed moves the lines of p (whole lines, each ending in a newline) that
// Noise does not call noise to the front of p, in place, and returns them
// with the number of lines dropped: launcher.Tap.Shed. A noise line holds
// infoTag, so a chunk without "INFO " (a burst of WARN lines: NCCL's lines
// rarely hold an 'I') is kept whole after one search of it, not a Noise a
// line. Safe for concurrent use on distinct chunks.
func Shed(p []byte) (kept []byte, shed int) {
	if noiseFree(p) {
		return p, 0
	}
	w := 0
	for r := 0; r < len(p); {
		end := r + bytes.IndexByte(p[r:], '\n') + 1
		if end == r { // a last line without its newline
			end = len(p)
		}
		if Noise(trimEOL(p[r:end])) {
			shed++
		} else {
			w += copy(p[w:], p[r:end])
		}
		r = end
	}
	return p[:w], shed
}

// noiseFree reports whether p, any number of lines, holds no line Noise
// calls noise; false when it may.
func noiseFree(p []byte) bool { return !bytes.Contains(p, infoWord) }

// infoWord is the part of infoTag noiseFree searches for: an 'I' is rare
// in NCCL's lines, an 'N' is in every one ("NCCL").
var infoWord = infoTag[len("NCCL "):]

// nccl returns the index of the first "NCCL " of p, or -1.
func nccl(p []byte) int {
	for i := 0; ; {
		j := bytes.IndexByte(p[i:], 'N')
		if j < 0 {
			return -1
		}
		i += j
		if len(p)-i >= 5 && binary.LittleEndian.Uint32(p[i:]) == ncclWord && p[i+4] == ' ' {
			return i
		}
		i++
	}
}

// ncclWord is "NCCL" as a little-endian word.
const ncclWord = 0x4c43434e

var (
	collChannels = []byte(" coll channels, ")
	netReceive   = []byte("[receive] via NET/")
	gdrdma       = []byte("/GDRDMA")
)

// netReceiveWithoutGDR reports whether channel message m is a receive
// through the network without GPUDirect RDMA. Such a line ends in the
// transport's device number (or "/Shared", or a ")"), a healthy one
// mostly in "/GDRDMA", "read", "IPC" or "direct": the last byte decides
// most lines before any search.
func netReceiveWithoutGDR(m []byte) bool {
	switch m[len(m)-1] {
	case 'A', 'C', 't':
		return false
	case 'd': // "read", or "/Shared", which may follow a bare NET
		if len(m) < 8 || binary.LittleEndian.Uint64(m[len(m)-8:])&^0xff != wShared {
			return false
		}
	}
	i := bytes.Index(m, netReceive)
	return i >= 0 && !bytes.Contains(m[i:], gdrdma)
}
