package diagnosis

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// heapAfter feeds n lines made by gen to a fresh matcher and returns its
// diagnoses and how much the live heap grew (after a GC, with the matcher
// still referenced).
func heapAfter(t testing.TB, n int, gen func(b []byte, i int) []byte) ([]Diagnosis, int64) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	m := NewMatcher(Facts{})
	line := make([]byte, 0, 256)
	for i := 0; i < n; i++ {
		line = gen(line[:0], i)
		m.Feed(line)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	ds := m.Diagnoses()
	runtime.KeepAlive(m)
	return ds, int64(after.HeapAlloc) - int64(before.HeapAlloc)
}

// TestBoundedState: a million matching lines from distinct processes on
// distinct hosts, each with its own text, keep the matcher's state
// bounded (it was 828 MB, and the summary named every host): counts are
// exact up to the caps, then lower bounds marked capped.
func TestBoundedState(t *testing.T) {
	const limit = 8 << 20 // live heap the matcher may add, whatever the input
	warns := []string{
		"misc/ibvwrap.cc:190 NCCL WARN Call to ibv_create_cq failed with error Cannot allocate memory",
		"misc/shmutils.cc:88 NCCL WARN Error: failed to extend /dev/shm/nccl-x to 9637892 bytes",
		"misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.0.2<45123> failed : Connection refused",
		"transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<5003> with error 12, opcode 0, len 0, vendor err 129 (Send)",
	}
	tests := []struct {
		name  string
		n     int
		gen   func(b []byte, i int) []byte
		ids   int  // causes expected
		hosts bool // hosts expected capped
	}{
		{"a million prefixed WARNs, distinct hosts and texts", 1_000_000, func(b []byte, i int) []byte {
			return fmt.Appendf(b, "node-%d:%d:%d [0] %s (%d)\n", i, 1000+i, 1000+i, warns[0], i)
		}, 1, true},
		{"four causes share the matcher's budget", 100_000, func(b []byte, i int) []byte {
			return fmt.Appendf(b, "node-%d:%d:%d [0] %s %d\n", i, 1000+i, 7, warns[i%len(warns)], i)
		}, 4, true},
		{"unprefixed distinct texts", 20_000, func(b []byte, i int) []byte {
			return fmt.Appendf(b, "RuntimeError: NCCL error in: x.cpp:%d, unhandled system error\n", i)
		}, 1, false},
		{"Ray processes", 20_000, func(b []byte, i int) []byte {
			return fmt.Appendf(b, "(RayWorkerWrapper pid=%d, ip=10.%d.%d.%d) Call to ibv_reg_mr failed with error Cannot allocate memory %d\n", 1000+i, i>>16&255, i>>8&255, i&255, i)
		}, 1, true},
		{"torchrun summaries of distinct pids", 100_000, func(b []byte, i int) []byte {
			switch i % 4 {
			case 0:
				return fmt.Appendf(b, "  host      : node-%d.cluster\n", i)
			case 1:
				return fmt.Appendf(b, "  exitcode  : 1 (pid: %d)\n", 1000+i)
			case 2:
				return fmt.Appendf(b, "  RuntimeError: NCCL error in: x.cpp:%d, unhandled system error\n", i)
			}
			return append(b, "----------------\n"...)
		}, 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if raceEnabled {
				// Still past the caps (4096 processes, 1024 hosts and
				// texts): the state must have stopped growing there.
				// Four causes share the budget of 16384 processes; a
				// summary entry is four lines.
				least := 6_000
				if tt.ids > 1 || strings.Contains(tt.name, "torchrun") {
					least = 20_000
				}
				tt.n = max(tt.n/20, least)
			}
			ds, grew := heapAfter(t, tt.n, tt.gen)
			t.Logf("%d lines: live heap grew %d KiB", tt.n, grew>>10)
			assert.Less(t, grew, int64(limit))
			require.Len(t, ds, tt.ids)
			total := 0
			for _, d := range ds {
				total += d.Lines
				assert.True(t, d.CountCapped, "%s: count is a lower bound", d.ID)
				assert.LessOrEqual(t, d.Count, maxProcs)
				assert.Greater(t, d.Count, 1000, "%s: exact up to the cap", d.ID)
				assert.LessOrEqual(t, len(d.Hosts), maxHosts)
				assert.Equal(t, tt.hosts, d.HostsCapped, d.ID)
			}
			assert.GreaterOrEqual(t, total, tt.n/4, "every matching line counted")
		})
	}
}

// TestCapsExact: below the caps, counts and hosts are exact and not
// marked capped; one more process is.
func TestCapsExact(t *testing.T) {
	gen := func(n, hosts int) string {
		var b []byte
		for i := 0; i < n; i++ {
			b = fmt.Appendf(b, "node-%d:%d:1 [0] misc/ibvwrap.cc:190 NCCL WARN Call to ibv_create_cq failed with error Cannot allocate memory\n", i%hosts, 10+i)
		}
		return string(b)
	}
	ds := explainString(t, gen(maxProcs, maxHosts), Facts{})
	require.Len(t, ds, 1)
	assert.Equal(t, maxProcs, ds[0].Count)
	assert.False(t, ds[0].CountCapped)
	assert.Len(t, ds[0].Hosts, maxHosts)
	assert.False(t, ds[0].HostsCapped)

	ds = explainString(t, gen(maxProcs+1, maxHosts+1), Facts{})
	require.Len(t, ds, 1)
	assert.Equal(t, maxProcs, ds[0].Count)
	assert.True(t, ds[0].CountCapped)
	assert.Len(t, ds[0].Hosts, maxHosts)
	assert.True(t, ds[0].HostsCapped)
}

// BenchmarkDistinctProcesses: WARN lines from ever new processes (the
// state-bounding path: past the caps a line costs no allocation for state).
func BenchmarkDistinctProcesses(b *testing.B) {
	m := NewMatcher(Facts{})
	line := make([]byte, 0, 256)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		line = fmt.Appendf(line[:0], "node-%d:%d:%d [0] misc/ibvwrap.cc:190 NCCL WARN Call to ibv_create_cq failed with error Cannot allocate memory\n", i, 1000+i, i)
		b.SetBytes(int64(len(line)))
		m.Feed(line)
	}
}

// BenchmarkMatcherFeedWarn feeds WARN-only output (four failure texts
// from 16 hosts x 64 processes, as a failing job repeats them): the path
// where every line reaches the patterns (100 MiB/s is the
// target for explain on such logs).
func BenchmarkMatcherFeedWarn(b *testing.B) {
	texts := []string{
		"transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<5003> with error 12, opcode 0, len 0, vendor err 129 (Send)",
		"misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.0.2<45123> failed : Connection refused",
		"misc/ibvwrap.cc:190 NCCL WARN Call to ibv_create_cq failed with error Cannot allocate memory",
		"include/alloc.h:48 NCCL WARN Cuda failure 'out of memory'",
	}
	var lines [][]byte
	for i := 0; i < 1024; i++ {
		lines = append(lines, fmt.Appendf(nil, "node-%d:%d:%d [%d] %s\n", i%16, 1000+i%64, 2000+i%64, i%8, texts[i%len(texts)]))
	}
	m := NewMatcher(Facts{})
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		l := lines[i%len(lines)]
		b.SetBytes(int64(len(l)))
		m.Feed(l)
	}
}

// TestCountPastTextCaps: once a cause's processes and texts outgrow the
// pair caps, an echo of a text cannot be told from a process of its own
// (the processes that printed the text are no longer all known), so the
// count keeps to the processes it knows and says it is a lower bound
// instead of counting the echoes as more processes.
func TestCountPastTextCaps(t *testing.T) {
	const texts = 5
	const procs = maxTextPairs/texts + 24 // under maxProcs: the pairs are what overflows
	seg := func(k int) string {
		return fmt.Sprintf("Error while creating shared memory segment /dev/shm/nccl-%c (size 9637888)", 'A'+k)
	}
	var b strings.Builder
	for p := 0; p < procs; p++ {
		for k := 0; k < texts; k++ {
			fmt.Fprintf(&b, "node-%d:%d:%d [0] misc/shmutils.cc:132 NCCL WARN %s\n", p/8, 1000+p, 2000+p, seg(k))
		}
	}
	for p := 0; p < procs; p++ {
		fmt.Fprintf(&b, "Last error:\n%s\n", seg(texts-1)) // PyTorch's echo of each rank's last WARN
	}
	ds := explainString(t, b.String(), Facts{})
	require.Len(t, ds, 1, ids(ds))
	assert.Equal(t, "shm", ds[0].ID)
	assert.True(t, ds[0].CountCapped)
	assert.LessOrEqual(t, ds[0].Count, procs, "never more processes than printed the cause")
	assert.Equal(t, procs, ds[0].Count, "the processes that printed it prefixed are all counted")
}
