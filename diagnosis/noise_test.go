package diagnosis

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNoise(t *testing.T) {
	cases := []struct {
		line  string
		noise bool
	}{
		{"gpu-node-01:31010:31107 [2] NCCL INFO Channel 25/0 : 10[2] -> 11[3] via P2P/CUMEM/read", true},
		{"[default0]:gpu-node-01:31010:31107 [2] NCCL INFO Channel 03/0 : 7[7] -> 8[0] [receive] via NET/IB/3/GDRDMA", true},
		{"host:1:2 [0] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [receive] via NET/IB/0", false},
		{"host:1:2 [0] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [send] via NET/IB/0", true},
		{"host:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMAhost:3:4 [3] misc/ibvwrap.cc:190 NCCL WARN Call to ibv_create_qp failed", false},
		{"host:1:2 [0] NCCL INFO 24 coll channels, 24 collnet channels, 0 nvls channels, 32 p2p channels, 32 p2p channels per peer", true},
		{"host:1:2 [0] NCCL INFO 24 other things", false},
		{"host:1:2 [0] NCCL INFO comm 0x55d2c4a1b000 rank 10 nRanks 16 nNodes 2 localRanks 8 localRank 2 MNNVL 0", true},
		{"host:1:2 [0] NCCL INFO GPU Direct RDMA Disabled for HCA 0 'mlx5_0' (no module)", false},
		{"host:1:2 [0] NCCL INFO Ring 00 : 9 -> 10 -> 11", true},
		{"host:1:2 [0] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [receive] via NET/IB/0/Shared", false},
		{"host:1:2 [0] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [receive] via NET/IB/0(1)/GDRDMA", true},
		{"host:1:2 [0] NCCL INFO Rin", false},
		{"host:1:2 [0] NCCL INFO Ring", false},
		{"host:1:2 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x1", true},
		{"host:1:2 [0] NCCL INFO AllReduce: opcount 0", false},
		{"host:1:2 [0] NCCL INFOChannel 00/0", false},
		{"x NCCL WARN y NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC", false},
		{"host:1:2 [0] NCCL INFO Trees [0] 11/-1/-1->10->9", true},
		{"host:1:2 [0] NCCL INFO Connected all rings", true},
		{"host:1:2 [0] NCCL INFO AllReduce: opCount 3f sendbuff 0x7f0012ab00 recvbuff 0x7f0012ab00 count 4096", true},
		{"host:1:2 [0] NCCL WARN Call to ibv_reg_mr failed with error Cannot allocate memory", false},
		{"host:1:2 [0] NCCL INFO NET/IB : No device found.", false},
		{"host:1:2 [0] NCCL INFO Call to ibv_modify_qp failed with 110 Connection timed out", false},
		{"host:1:2 [0] NCCL INFO ", false},
		{"host:1:2 [0] NCCL INFO", false},
		{"RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1269, unhandled system error", false},
		{"Channel 00 : not an NCCL line", false},
		{"", false},
	}
	for _, c := range cases {
		assert.Equal(t, c.noise, Noise([]byte(c.line)), c.line)
		if c.noise {
			assert.False(t, noiseFree([]byte(c.line)), "noiseFree of a noise line: %s", c.line)
		}
	}
}

// TestNoiseFree: a chunk of lines without a noise line may be called free
// of noise; one with a noise line anywhere never is.
func TestNoiseFree(t *testing.T) {
	warn := "gpu-node-00:31001:31098 [1] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer 10.1.0.2<53412> with status=12\n"
	noise := "gpu-node-01:31010:31107 [2] NCCL INFO Channel 25/0 : 10[2] -> 11[3] via P2P/CUMEM/read\n"
	for _, c := range []struct {
		name  string
		chunk string
		free  bool
	}{
		{"empty", "", true},
		{"WARN lines only", strings.Repeat(warn, 100), true},
		{"a noise line first", noise + strings.Repeat(warn, 100), false},
		{"a noise line last", strings.Repeat(warn, 100) + noise, false},
		{"a noise line without its newline", warn + strings.TrimSuffix(noise, "\n"), false},
		{"an INFO line that is not noise: may be", warn + "host:1:2 [0] NCCL INFO NET/IB : No device found.\n", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.free, noiseFree([]byte(c.chunk)))
		})
	}
}

// TestNoiseNeverAFailureLine: a line that a failure (non-marker) pattern of
// the shipped catalog matches is never Noise, for every sample line of the
// catalog and every line of the real logs (corpus, blind suites, healthy).
func TestNoiseNeverAFailureLine(t *testing.T) {
	var res []*regexp.Regexp
	var lines []string
	for _, e := range DefaultCatalog().Entries() {
		for _, p := range e.Patterns {
			if !p.Marker {
				res = append(res, regexp.MustCompile(p.Re))
			}
		}
		for _, s := range e.Samples.Match {
			lines = append(lines, strings.Split(s, "\n")...)
		}
	}
	require.NotEmpty(t, res)
	logs, err := filepath.Glob("testdata/*/*.log")
	require.NoError(t, err)
	require.NotEmpty(t, logs)
	for _, name := range logs {
		f, err := os.Open(name)
		require.NoError(t, err)
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for n := 0; sc.Scan(); n++ {
			if raceEnabled && n%raceStride != 0 {
				continue // raceSample's rule
			}
			if l := sc.Text(); strings.Contains(l, "NCCL INFO ") {
				lines = append(lines, l)
			}
		}
		require.NoError(t, sc.Err(), name)
		f.Close()
	}
	noise := 0
	for _, l := range lines {
		if !Noise([]byte(l)) {
			continue
		}
		noise++
		for _, re := range res {
			assert.False(t, re.MatchString(l), "Noise(%q) but failure pattern %s matches it", l, re)
		}
	}
	assert.Positive(t, noise, "the logs have noise lines")
}

func BenchmarkNoise(b *testing.B) {
	var lines [][]byte
	for _, l := range strings.Split(strings.TrimSpace(gramRef), "\n") {
		lines = append(lines, []byte(l))
	}
	lines = append(lines, []byte("host:1:2 [0] NCCL WARN Call to ibv_reg_mr failed with error Cannot allocate memory"))
	n := 0
	for _, l := range lines {
		n += len(l) + 1
	}
	b.SetBytes(int64(n))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, l := range lines {
			Noise(l)
		}
	}
}

// TestShed: the lines that are not noise stay, in order and byte for byte,
// and the noise lines are counted; a chunk without noise is kept whole.
func TestShed(t *testing.T) {
	noise := "gpu-node-01:31010:31107 [2] NCCL INFO Channel 25/0 : 10[2] -> 11[3] via P2P/CUMEM/read\n"
	warn := "gpu-node-00:31001:31098 [1] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer 10.1.0.2<53412> with status=12\n"
	info := "host:1:2 [0] NCCL INFO NET/IB : No device found.\r\n"
	for _, c := range []struct{ name, in, kept string }{
		{"empty", "", ""},
		{"noise only", noise + noise, ""},
		{"WARN only", warn + warn, warn + warn},
		{"mixed", noise + warn + "\n" + noise + info + noise, warn + "\n" + info},
		{"a last line without its newline", warn + strings.TrimSuffix(noise, "\n"), warn},
	} {
		t.Run(c.name, func(t *testing.T) {
			kept, shed := Shed([]byte(c.in))
			assert.Equal(t, c.kept, string(kept))
			assert.Equal(t, strings.Count(c.in, "INFO Channel"), shed)
		})
	}
}
