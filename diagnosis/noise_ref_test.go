package diagnosis

import (
	"bytes"
	"encoding/binary"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// noiseRef is Noise written plainly (a table of noiseStarts
// indexed by the first byte, bytes.HasPrefix each): the reference that
// Noise's word comparisons must agree with on every line.
var refKinds = func() (k [256][][]byte) {
	for _, s := range noiseStarts {
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
func noiseRef(line []byte) bool {
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
		return bytes.Contains(m, refCollChannels)
	}
	for _, k := range refKinds[c] {
		if bytes.HasPrefix(m, k) {
			return c != 'C' || k[1] != 'h' || !refNetReceiveWithoutGDR(m)
		}
	}
	return false
}

var (
	refCollChannels = []byte(" coll channels, ")
	refNetReceive   = []byte("[receive] via NET/")
	refGdrdma       = []byte("/GDRDMA")
	refShared       = []byte("/Shared")
)

// refNetReceiveWithoutGDR reports whether channel message m is a receive
// through the network without GPUDirect RDMA. Such a line ends in the
// transport's device number (or "/Shared", or a ")"), a healthy one
// mostly in "/GDRDMA", "read", "IPC" or "direct": the last byte decides
// most lines before any search.
func refNetReceiveWithoutGDR(m []byte) bool {
	switch last := m[len(m)-1]; {
	case last == 'A' || last == 'd' || last == 'C' || last == 't':
		if !bytes.HasSuffix(m, refShared) { // only "/Shared" ends in 'd' and may follow a bare NET
			return false
		}
	}
	i := bytes.Index(m, refNetReceive)
	return i >= 0 && !bytes.Contains(m[i:], refGdrdma)
}

// noiseProbes are lines around every start Noise looks for: each start cut
// short at every length, whole, with a message after it, glued to a WARN
// line, and with other prefixes in front.
func noiseProbes() []string {
	var out []string
	starts := append(append([]string{}, noiseStarts...), "24 coll channels, 24 collnet channels", "Channel 00/0 : 8[0] -> 0[0] [receive] via NET/IB/0",
		"Channel 00/0 : 8[0] -> 0[0] [receive] via NET/IB/0/GDRDMA", "Channel 00/0 : 8[0] -> 0[0] [receive] via NET/IB/0/Shared", "Trees [0] 1/-1/-1->0->-1")
	for _, k := range starts {
		for j := 0; j <= len(k); j++ {
			for _, pre := range []string{"host:1:2 [0] NCCL INFO ", "[default0]:gpu-node-01:31010:31107 [2] NCCL INFO ", "NCCL INFO ", "x NCCL WARN ", "NCCL INFOx", "N NCCL INFO ", "NCCL NCCL INFO "} {
				for _, post := range []string{"", " x", "NCCL", " NCCL WARN oops", "x NCCL INFO Channel 01", "N", "NCCL "} {
					out = append(out, pre+k[:j]+post)
				}
			}
		}
	}
	return out
}

// referenceLines are the probes and every line of the test logs.
func referenceLines(t *testing.T) []string {
	lines := noiseProbes()
	logs, err := filepath.Glob("testdata/*/*.log")
	require.NoError(t, err)
	for _, name := range logs {
		lines = append(lines, logLines(t, name)...)
	}
	return append(lines, strings.Split(gramRef, "\n")...)
}

func TestNoiseSameAsReference(t *testing.T) {
	noise := 0
	for _, l := range referenceLines(t) {
		want := noiseRef([]byte(l))
		if want {
			noise++
		}
		require.Equal(t, want, Noise([]byte(l)), "%q", l)
	}
	assert.Greater(t, noise, 100, "the probes and logs have noise lines")
}

func TestNoiseKindWords(t *testing.T) {
	word := func(s string) uint64 {
		var b [8]byte
		copy(b[:], s)
		return binary.LittleEndian.Uint64(b[:])
	}
	for _, c := range []struct {
		w uint64
		s string
	}{
		{wChannel, "Channel "}, {wConnecte, "Connecte"}, {wThreadTh, "threadTh"}, {wP2PChun, "P2P Chun"},
		{wNcclCom, "ncclComm"}, {wSetting, "Setting "}, {wNetIB, "NET/IB :"}, {wGPUDire, "GPU Dire"},
		{wComm0x, "comm 0x"}, {wTrees, "Trees "}, {wRing, "Ring "}, {wShared, "\x00/Shared"},
	} {
		assert.Equal(t, word(c.s), c.w, c.s)
	}
}

func TestNCCLWord(t *testing.T) {
	assert.Equal(t, binary.LittleEndian.Uint32([]byte("NCCL")), uint32(ncclWord))
}
