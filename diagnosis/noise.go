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

// noiseKinds are the starts of the NCCL INFO messages a healthy job prints
// by the thousand: the per-channel, ring and tree connection lines of every
// communicator's set-up, the per-collective lines of NCCL_DEBUG_SUBSYS=COLL,
// and the per-communicator summaries that a healthy set-up prints
// ("N coll channels, ..." is matched apart: it starts with a number),
// indexed by their first byte. No failure pattern of the catalog matches
// one of them (TestNoiseNeverAFailureLine checks every sample and every
// corpus line); some are marker lines ("via NET/", "nNodes"), whose loss
// under pressure only leaves a marker unseen for a while. One channel line
// is not noise: a receive through the network without GPUDirect RDMA
// ("[receive] via NET/IB/0", no "/GDRDMA") is what gpudirect's mixed
// pattern looks for.
var noiseKinds = func() (k [256][][]byte) {
	for _, s := range []string{
		"Channel ", "Ring ", "Trees ", "Connected all ", "threadThresholds ",
		"P2P Chunksize", "comm 0x", "ncclCommInitRank comm ",
		"Setting affinity for GPU ", "NET/IB : Using [", "GPU Direct RDMA Enabled ",
		"AllReduce: opCount", "AllGather: opCount", "ReduceScatter: opCount",
		"Broadcast: opCount", "Reduce: opCount", "Send: opCount", "Recv: opCount",
		"AllToAll: opCount",
	} {
		k[s[0]] = append(k[s[0]], []byte(s))
	}
	return k
}()

// Noise reports whether line is NCCL INFO noise: an NCCL INFO line of one
// of the kinds a healthy job prints by the thousand (channel, ring and tree
// connections, per-collective traces). A supervisor whose diagnosis falls
// behind a burst of output may shed these lines and must keep every other
// one: every WARN line, every error, every other INFO line. It costs a
// search for "NCCL INFO " and a prefix test (no allocation) and is safe
// for concurrent use.
func Noise(line []byte) bool {
	// One pass over the line's 'N's: the first "NCCL " must be "NCCL INFO ",
	// and no second one may follow (lines of two processes glued together,
	// with no newline between them: the other line may be a WARN).
	msg := -1
	for i := 0; ; {
		j := bytes.IndexByte(line[i:], 'N')
		if j < 0 {
			break
		}
		i += j
		if rest := line[i:]; len(rest) < 5 || rest[1] != 'C' || rest[2] != 'C' || rest[3] != 'L' || rest[4] != ' ' {
			i++
			continue
		}
		if msg >= 0 || len(line)-i < len(infoTag) || binary.LittleEndian.Uint64(line[i:]) != infoTag8 || line[i+8] != 'O' || line[i+9] != ' ' {
			return false
		}
		i += len(infoTag)
		msg = i
	}
	if msg < 0 || msg == len(line) {
		return false
	}
	m := line[msg:]
	c := m[0]
	if '0' <= c && c <= '9' {
		return bytes.Contains(m, collChannels)
	}
	for _, k := range noiseKinds[c] {
		if bytes.HasPrefix(m, k) {
			return c != 'C' || k[1] != 'h' || !netReceiveWithoutGDR(m)
		}
	}
	return false
}

var (
	collChannels = []byte(" coll channels, ")
	netReceive   = []byte("[receive] via NET/")
	gdrdma       = []byte("/GDRDMA")
	shared       = []byte("/Shared")
)

// netReceiveWithoutGDR reports whether channel message m is a receive
// through the network without GPUDirect RDMA. Such a line ends in the
// transport's device number (or "/Shared", or a ")"), a healthy one
// mostly in "/GDRDMA", "read", "IPC" or "direct": the last byte decides
// most lines before any search.
func netReceiveWithoutGDR(m []byte) bool {
	switch last := m[len(m)-1]; {
	case last == 'A' || last == 'd' || last == 'C' || last == 't':
		if !bytes.HasSuffix(m, shared) { // only "/Shared" ends in 'd' and may follow a bare NET
			return false
		}
	}
	i := bytes.Index(m, netReceive)
	return i >= 0 && !bytes.Contains(m[i:], gdrdma)
}
