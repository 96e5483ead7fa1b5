package diagnosis

import "bytes"

// infoTag starts the message of an NCCL INFO line
// ("host:pid:tid [dev] NCCL INFO <message>").
var infoTag = []byte("NCCL INFO ")

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
func isNoiseKind(m []byte) bool {
	if len(m) == 0 {
		return false
	}
	if c := m[0]; '0' <= c && c <= '9' {
		return bytes.Contains(m, collChannels)
	}
	for _, k := range noiseStarts[m[0]] {
		if bytes.HasPrefix(m, k) {
			return !bytes.Equal(k, channel) || !netReceiveWithoutGDR(m)
		}
	}
	return false
}

var channel = []byte("Channel ")

// noiseStarts are the starts isNoiseKind looks for (but "N coll channels,
// ..."), by their first byte.
var noiseStarts = func() (by [256][][]byte) {
	for _, s := range []string{
		"Channel ", "Ring ", "Trees ", "Connected all ", "threadThresholds ",
		"P2P Chunksize", "comm 0x", "ncclCommInitRank comm ",
		"Setting affinity for GPU ", "NET/IB : Using [", "GPU Direct RDMA Enabled ",
		"AllReduce: opCount", "AllGather: opCount", "ReduceScatter: opCount",
		"Broadcast: opCount", "Reduce: opCount", "Send: opCount", "Recv: opCount",
		"AllToAll: opCount",
	} {
		by[s[0]] = append(by[s[0]], []byte(s))
	}
	return by
}()

// Noise reports whether line is NCCL INFO noise: an NCCL INFO line of one
// of the kinds a healthy job prints by the thousand (channel, ring and tree
// connections, per-collective traces). A supervisor whose diagnosis falls
// behind a burst of output may shed these lines and must keep every other
// one: every WARN line, every error, every other INFO line. It costs two
// searches for "NCCL " and a few prefix comparisons (no allocation) and is
// safe for concurrent use.
func Noise(line []byte) bool {
	// The first "NCCL " must be "NCCL INFO ", and no second one may follow
	// (lines of two processes glued together, with no newline between
	// them: the other line may be a WARN).
	i := nccl(line)
	if i < 0 || !bytes.HasPrefix(line[i:], infoTag) {
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
func nccl(p []byte) int { return bytes.Index(p, ncclWord) }

var ncclWord = []byte("NCCL ")

var (
	collChannels = []byte(" coll channels, ")
	netReceive   = []byte("[receive] via NET/")
	gdrdma       = []byte("/GDRDMA")
)

// netReceiveWithoutGDR reports whether channel message m is a receive
// through the network without GPUDirect RDMA.
func netReceiveWithoutGDR(m []byte) bool {
	i := bytes.Index(m, netReceive)
	return i >= 0 && !bytes.Contains(m[i:], gdrdma)
}
