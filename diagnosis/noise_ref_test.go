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

// noiseRef is Noise as the fourth pass wrote it (a table of noiseStarts
// indexed by the first byte, bytes.HasPrefix each): the reference that
// Noise's word comparisons and NoiseLines must agree with on every line.
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

// checkNoiseLines: NoiseLines of p keeps exactly the lines noiseRef does
// not call noise, in order, and counts the others.
func checkNoiseLines(t testing.TB, p []byte) {
	t.Helper()
	var kept [][]byte
	n, size := NoiseLines(p, func(l []byte) { kept = append(kept, l) })
	var want [][]byte
	wn, wsize := 0, 0
	for len(p) > 0 {
		e := bytes.IndexByte(p, '\n')
		if e < 0 {
			e = len(p)
		}
		if noiseRef(p[:e]) {
			wn++
			wsize += min(e+1, len(p))
		} else {
			want = append(want, p[:e])
		}
		p = p[min(e+1, len(p)):]
	}
	if len(kept) != len(want) || n != wn || size != wsize {
		t.Fatalf("NoiseLines kept %d lines, shed %d (%d bytes); the reference keeps %d, sheds %d (%d bytes)", len(kept), n, size, len(want), wn, wsize)
	}
	for i := range kept {
		if !bytes.Equal(kept[i], want[i]) {
			t.Fatalf("kept line %d: %q, the reference keeps %q", i, kept[i], want[i])
		}
	}
}

func TestNoiseLinesSameAsReference(t *testing.T) {
	lines := referenceLines(t)
	all := []byte(strings.Join(lines, "\n") + "\n")
	checkNoiseLines(t, all)
	checkNoiseLines(t, all[:len(all)-1]) // the last line without its newline
	for i := 0; i+3 <= len(lines); i++ { // each line between others, and first and last
		checkNoiseLines(t, []byte(strings.Join(lines[i:i+3], "\n")))
	}
	checkNoiseLines(t, nil)
	checkNoiseLines(t, []byte("\n\n"))
}

func FuzzNoise(f *testing.F) {
	for _, l := range noiseProbes() {
		f.Add([]byte(l))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		if line, _, _ := bytes.Cut(p, []byte("\n")); Noise(line) != noiseRef(line) {
			t.Fatalf("Noise(%q) = %v, the reference says %v", line, Noise(line), noiseRef(line))
		}
		checkNoiseLines(t, p)
	})
}

func BenchmarkNoiseLines(b *testing.B) {
	var p []byte
	for _, l := range strings.Split(strings.TrimSpace(gramRef), "\n") {
		p = append(append(p, l...), '\n')
	}
	p = append(p, "host:1:2 [0] NCCL WARN Call to ibv_reg_mr failed with error Cannot allocate memory\n"...)
	kept := 0
	b.SetBytes(int64(len(p)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		NoiseLines(p, func([]byte) { kept++ })
	}
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
