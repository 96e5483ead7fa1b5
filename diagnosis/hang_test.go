package diagnosis

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// scanFiles reads each file into a view of its own (a node's log).
func scanFiles(t *testing.T, node string, world, perNode int, names ...string) []HangView {
	t.Helper()
	var vs []HangView
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join("testdata", "hang", n))
		require.NoError(t, err)
		s := NewHangScan(node, world, perNode)
		_, _ = s.Write(b)
		s.Flush()
		vs = append(vs, s.View())
	}
	return vs
}

// Promise: on the fixture of every version's lines the stalled rank is
// named, with its host where the lines tell it, and the waiting ranks,
// the sequence, op and size are those the lines give.
func TestHangFixtures(t *testing.T) {
	type want struct {
		pg        string
		seq       int64
		op        string
		waited    []int
		stalled   []StalledRank
		certainty string
		mismatch  []OpMismatch
		last      []string // lines expected among the first stalled rank's last lines
		headline  string
	}
	cases := []struct {
		name           string
		files          []string
		node           string
		world, perNode int
		want           want
	}{
		{name: "1.13 behind srun --label", files: []string{"v1.13-srun.log"}, want: want{
			seq: 141, op: "ALLREDUCE", waited: []int{0, 2, 3}, stalled: []StalledRank{{Rank: 1}},
			certainty: HangLikely, last: []string{"loading eval shard /data/eval-07.bin"}}},
		{name: "2.1 odd size", files: []string{"v2.1-numel.log"}, want: want{
			seq: 88, op: "ALLGATHER", waited: []int{0, 1, 2, 3}, stalled: []StalledRank{},
			certainty: HangLikely, mismatch: []OpMismatch{{Rank: 3, Op: "ALLGATHER", Numel: 161600}},
			headline: "every rank"}},
		{name: "2.3 nightly", files: []string{"v2.3-nightly.log"}, want: want{
			pg: "0", seq: 1203, op: "BROADCAST", waited: []int{0, 1, 3}, stalled: []StalledRank{{Rank: 2}},
			certainty: HangLikely, last: []string{"epoch 3 batch 900"}}},
		{name: "2.4 dump signal shows E < S", files: []string{"v2.4-dump.log"}, want: want{
			pg: "0(default_pg)", seq: 12, op: "ALLREDUCE", waited: []int{0, 1, 2}, stalled: []StalledRank{{Rank: 3}},
			certainty: HangCertain, last: []string{"retrying read of /mnt/shared/shard-0031 (EIO)"}}},
		{name: "2.6 GUID prefix", files: []string{"v2.6-guid.log"}, want: want{
			pg: "0(default_pg)", seq: 78, op: "BROADCAST", waited: []int{0, 1, 2, 3, 6, 7},
			stalled: []StalledRank{{Rank: 4}, {Rank: 5}}, certainty: HangCertain}},
		{name: "2.6 sub-group counters stay in their group", files: []string{"v2.6-subpg.log"}, want: want{
			pg: "3", seq: 40, op: "", waited: []int{0, 2, 4}, stalled: []StalledRank{{Rank: 6}}, certainty: HangCertain}},
		{name: "2.6 different collectives", files: []string{"v2.6-desync.log"}, want: want{
			pg: "0(default_pg)", seq: 2070, op: "ALLREDUCE", waited: []int{0, 1, 2, 3}, stalled: []StalledRank{},
			certainty: HangCertain, mismatch: []OpMismatch{{Rank: 2, Op: "REDUCE", Numel: 1048576}}}},
		{name: "2.6 every rank joined after a WARN", files: []string{"v2.6-alljoined.log"}, want: want{
			pg: "0(default_pg)", seq: 310, op: "ALLREDUCE", waited: []int{0, 1}, stalled: []StalledRank{},
			certainty: HangCertain, headline: "NCCL WARN NET/IB : Got completion from peer"}},
		{name: "kubectl logs --prefix", files: []string{"kubectl-prefix.log"}, want: want{
			pg: "0(default_pg)", seq: 301, op: "ALLREDUCE", waited: []int{0, 1, 2},
			stalled: []StalledRank{{Rank: 3, Host: "train-worker-1"}}, certainty: HangLikely,
			last: []string{"rank 3 waiting for the dataloader worker"}}},
		// One rank's lines pasted: the ranks below it printed nothing and
		// the log gives no size, so their silence names nobody for sure.
		{name: "2.4 one rank's lines alone", files: []string{"v2.4-one-rank.log"}, want: want{
			pg: "0(default_pg)", seq: 512, op: "ALLREDUCE", waited: []int{3},
			stalled: []StalledRank{{Rank: 0}, {Rank: 1}, {Rank: 2}}, certainty: HangUnknown,
			headline: "printed nothing and may never have joined"}},
		{name: "desync report", files: []string{"desync-report.log"}, want: want{
			seq: 7, op: "ALLREDUCE", waited: []int{0}, stalled: []StalledRank{{Rank: 2}}, certainty: HangCertain}},
		{name: "gloo, both nodes' logs together", files: []string{"gloo-node0.log", "gloo-node1.log"}, want: want{
			op: "unknown", waited: []int{0, 2, 3}, stalled: []StalledRank{{Rank: 1, Host: "node0"}}, certainty: HangLikely}},
		{name: "gloo, the node that held it", files: []string{"gloo-node0.log"}, node: "node0", world: 4, perNode: 2, want: want{
			op: "unknown", waited: []int{0}, stalled: []StalledRank{{Rank: 1, Host: "node0"}}, certainty: HangLikely}},
		{name: "gloo, the other node", files: []string{"gloo-node1.log"}, node: "node1", world: 4, perNode: 2, want: want{
			op: "unknown", waited: []int{2, 3}, stalled: []StalledRank{{Rank: 0}, {Rank: 1}}, certainty: HangUnknown,
			headline: "on another node"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := JobHang(scanFiles(t, c.node, c.world, c.perNode, c.files...))
			require.NotNil(t, h)
			w := c.want
			assert.Equal(t, w.pg, h.PG, "pg")
			assert.Equal(t, w.seq, h.Seq, "seq")
			assert.Equal(t, w.op, h.Op, "op")
			assert.Equal(t, w.waited, h.Waited, "waited")
			assert.Equal(t, w.stalled, h.Stalled, "stalled")
			assert.Equal(t, w.certainty, h.Certainty, "certainty")
			assert.Equal(t, w.mismatch, h.OpMismatch, "op_mismatch")
			assert.NotEmpty(t, h.Evidence)
			if len(w.last) > 0 {
				got := strings.Join(h.LastLines[itoa(w.stalled[0].Rank)], "\n")
				for _, l := range w.last {
					assert.Contains(t, got, l)
				}
			}
			head := HangHeadline(h)
			if w.headline != "" {
				assert.Contains(t, head, w.headline)
			}
			if len(w.stalled) > 0 {
				assert.Contains(t, head, "rank")
				assert.Contains(t, head, itoa(w.stalled[0].Rank))
				if w.stalled[0].Host != "" {
					assert.Contains(t, head, w.stalled[0].Host)
				}
			}
		})
	}
}

// Promise: no hang without a timeout line: a failing job whose lines
// show no collective timeout has none.
func TestHangNoneWithoutTimeout(t *testing.T) {
	s := NewHangScan("", 0, 0)
	_, _ = s.Write([]byte("[rank0]:step 1\n[rank1]:RuntimeError: CUDA error: out of memory\n"))
	s.Flush()
	assert.Nil(t, s.Hang())
}

// Promise: the JSON of a hang has exactly the contract's fields.
func TestHangJSONFields(t *testing.T) {
	h := JobHang(scanFiles(t, "", 0, 0, "v2.4-dump.log"))
	b, err := json.Marshal(h)
	require.NoError(t, err)
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(b, &m))
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	assert.ElementsMatch(t, []string{"pg", "seq", "op", "numel", "waited", "stalled", "certainty", "evidence", "last_lines"}, keys)
	assert.JSONEq(t, `[{"rank":3}]`, string(m["stalled"]))
}

// Promise: a stalled rank is the first failure, before the waiting ranks'
// knock-on timeouts, and different collectives add rank-mismatch.
func TestApplyHang(t *testing.T) {
	m := NewMatcher(Facts{})
	b, err := os.ReadFile("testdata/hang/v2.4-dump.log")
	require.NoError(t, err)
	require.NoError(t, FeedReader(m, strings.NewReader(string(b))))
	ds, first := ApplyHang(m.Diagnoses(), m.FirstFailure(), JobHang(scanFiles(t, "", 0, 0, "v2.4-dump.log")))
	require.NotNil(t, first)
	require.NotNil(t, first.Rank)
	assert.Equal(t, 3, *first.Rank)
	assert.Contains(t, first.Line, "rank 3 never joined ALLREDUCE #12")
	for _, d := range ds {
		if d.ID == "collective-timeout" {
			require.NotNil(t, d.FirstFailure)
			assert.Equal(t, 3, *d.FirstFailure.Rank)
		}
	}
	ds, _ = ApplyHang(nil, nil, JobHang(scanFiles(t, "", 0, 0, "v2.6-desync.log")))
	require.Len(t, ds, 1)
	assert.Equal(t, "rank-mismatch", ds[0].ID)
	assert.Contains(t, ds[0].Cause, "rank 2 called REDUCE")
}

// Promise: the real two-node gloo hang (torch 1.13, acceptance's
// TestMultinodeHangGloo): each node's output as run sees it (CMD tells 4
// ranks, 2 a node) names rank 1 on node0 on the node that held it and
// says on the other that the rank it waited for ran elsewhere; both
// outputs together name rank 1 on node0.
func TestHangRealGloo(t *testing.T) {
	view := func(name, node string, world, per int) HangView {
		b, err := os.ReadFile(filepath.Join("testdata", "multinode", name))
		require.NoError(t, err)
		s := NewHangScan(node, world, per)
		_, _ = s.Write(b)
		s.Flush()
		return s.View()
	}
	held := JobHang([]HangView{view("torchrun-hang.node0.log", "node0", 4, 2)})
	require.NotNil(t, held)
	assert.Equal(t, []StalledRank{{Rank: 1, Host: "node0"}}, held.Stalled)
	assert.Equal(t, []int{0}, held.Waited)
	other := JobHang([]HangView{view("torchrun-hang.node1.log", "node1", 4, 2)})
	require.NotNil(t, other)
	assert.Equal(t, HangUnknown, other.Certainty)
	assert.Equal(t, []StalledRank{{Rank: 0}, {Rank: 1}}, other.Stalled)
	assert.Contains(t, HangHeadline(other), "ranks 2-3 waited in the collective for a rank on another node")
	// One node's log alone, without the job's size, tells no verdict:
	// not that every rank joined.
	alone := JobHang([]HangView{view("torchrun-hang.node0.log", "", 0, 0)})
	require.NotNil(t, alone)
	assert.Empty(t, alone.Stalled)
	assert.Equal(t, HangUnknown, alone.Certainty)
	assert.NotContains(t, HangHeadline(alone), "every rank")
	both := JobHang([]HangView{view("torchrun-hang.node0.log", "", 0, 0), view("torchrun-hang.node1.log", "", 0, 0)})
	require.NotNil(t, both)
	assert.Equal(t, []StalledRank{{Rank: 1, Host: "node0"}}, both.Stalled)
	assert.Equal(t, []int{0, 2, 3}, both.Waited)
}

// Promise: the job's size and ranks a node come from the launcher's
// command line where it fixes them, and are unknown where it does not.
func TestWorldFromCommand(t *testing.T) {
	cases := []struct {
		argv       []string
		world, per int
	}{
		{[]string{"torchrun", "--nnodes", "2", "--nproc_per_node", "4", "train.py", "--nnodes", "9"}, 8, 4},
		{[]string{"/usr/bin/torchrun", "--nnodes=2:2", "--nproc-per-node=8", "--rdzv_backend", "c10d", "t.py"}, 16, 8},
		{[]string{"torchrun", "--nnodes", "1:4", "--nproc_per_node", "8", "t.py"}, 0, 8},
		{[]string{"torchrun", "--standalone", "--nproc_per_node", "2", "t.py"}, 2, 2},
		{[]string{"python3", "-m", "torch.distributed.run", "--nnodes", "2", "--nproc_per_node", "2", "t.py"}, 4, 2},
		{[]string{"mpirun", "-np", "16", "-npernode", "8", "python", "t.py"}, 16, 8},
		{[]string{"srun", "--ntasks=32", "--ntasks-per-node=8", "python", "t.py"}, 32, 8},
		{[]string{"python", "train.py"}, 0, 0},
		{[]string{"mpirun", "-x", "NCCL_DEBUG", "./a.out", "-np", "3"}, 0, 0}, // the program's own -np
		{[]string{"mpirun.openmpi", "--oversubscribe", "-np", "2", "./a.out"}, 2, 0},
		{[]string{"ncclrun", "run", "--", "mpiexec", "--np=4", "./a.out"}, 4, 0},
	}
	for _, c := range cases {
		w, p := WorldFromCommand(c.argv)
		assert.Equal(t, c.world, w, "%q", c.argv)
		assert.Equal(t, c.per, p, "%q", c.argv)
	}
}

// Promise: the view a termination message carries reads back as the
// verdict of the node's own view, within the bound it was given, and a
// view too large for the bound loses its records, never the bound.
func TestTerminationViewRoundTrip(t *testing.T) {
	v := scanFiles(t, "node0", 8, 8, "v2.6-guid.log")[0]
	line := v.TerminationView(2048)
	require.NotEmpty(t, line)
	assert.LessOrEqual(t, len(line), 2048)
	back, ok := ParseTerminationView("ncclrun: hang: ...\n" + line + "fix: ...\n")
	require.True(t, ok)
	assert.Equal(t, JobHang([]HangView{v}).Stalled, JobHang([]HangView{back}).Stalled)
	small := v.TerminationView(400)
	assert.LessOrEqual(t, len(small), 400)
	cut, ok := ParseTerminationView(small)
	require.True(t, ok)
	assert.True(t, cut.Capped, "a view that lost records says so")
	assert.Less(t, len(cut.Records), len(v.Records))
	_, ok = ParseTerminationView("no view here\n")
	assert.False(t, ok)
}

// BenchmarkHangScanChunk is what the hang scan adds to run's tap: a chunk
// of just under 128 KiB of a healthy job's tagged output (torchrun's
// "[rankN]:" on NCCL INFO and training lines of 16 ranks), as
// BenchmarkWatchFeedWarn feeds the matcher (docs/hangs.md, "Costs").
func BenchmarkHangScanChunk(b *testing.B) {
	var chunk []byte
	for i := 0; len(chunk) < 128<<10-300; i++ {
		r := i % 16
		if i%2 == 0 {
			chunk = fmt.Appendf(chunk, "[rank%d]:node-%d:%d:%d [%d] NCCL INFO Channel %02d/0 : %d[%d] -> %d[%d] via P2P/CUMEM/read\n", r, r/8, 1000+r, 2000+r, r%8, i%32, r, r%8, (r+1)%16, (r+1)%8)
		} else {
			chunk = fmt.Appendf(chunk, "[rank%d]:step %d loss %.4f lr 3.0e-04 grad_norm 0.412\n", r, i, 2.0+float64(i%100)/1000)
		}
	}
	s := NewHangScan("node-0", 16, 8)
	b.SetBytes(int64(len(chunk)))
	b.ReportAllocs()
	for b.Loop() {
		s.FeedChunk(chunk)
	}
}

// FuzzHangScan: any bytes, fed in any split, give a bounded view and a
// verdict without a panic: at most hangLastLines lines a rank, each at
// most hangLineMax bytes before quoting, stalled ranks sorted and unique.
func FuzzHangScan(f *testing.F) {
	for _, n := range []string{"v1.13-srun.log", "v2.4-dump.log", "v2.6-guid.log", "gloo-node0.log", "kubectl-prefix.log"} {
		b, err := os.ReadFile(filepath.Join("testdata", "hang", n))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, uint16(len(b)/3))
	}
	f.Add([]byte("[rank1]:[E1 ProcessGroupNCCL.cpp:1] [PG ID 0 PG GUID 0(default_pg) Rank 1]  failure detected by watchdog at work sequence id: 9999999999999999999999 PG status: last enqueued work: -1, last completed work: -9\n"), uint16(7))
	f.Fuzz(func(t *testing.T, b []byte, split uint16) {
		s := NewHangScan("n", 0, 0)
		k := min(int(split), len(b))
		_, _ = s.Write(b[:k])
		_, _ = s.Write(b[k:])
		s.Flush()
		v := s.View()
		for _, ls := range v.Last {
			if len(ls) > hangLastLines {
				t.Fatalf("%d last lines", len(ls))
			}
		}
		if len(v.Records) > hangMaxRecords+hangMaxNaming {
			t.Fatalf("%d records", len(v.Records))
		}
		h := JobHang([]HangView{v})
		if h == nil {
			return
		}
		for i := 1; i < len(h.Stalled); i++ {
			if h.Stalled[i].Rank <= h.Stalled[i-1].Rank {
				t.Fatalf("stalled %v", h.Stalled)
			}
		}
		_ = HangText(h)
	})
}

// The hang automaton's has is a search for each of hangLits.
func TestHangAutomatonHas(t *testing.T) {
	ac := hangAutomaton.Get()
	lines := []string{
		"", "x", "NCCL INFO Channel 00/02 :    0   1", "node1:12:12 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 - Init COMPLETE",
		"[E ProcessGroupNCCL.cpp:737] [Rank 1] Watchdog caught collective operation timeout", "Watchdog caugh", "======", "=====",
		"RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 5000ms for recv",
	}
	for _, l := range lines {
		want := false
		for _, lit := range hangLits {
			want = want || bytes.Contains([]byte(l), lit)
		}
		assert.Equal(t, want, ac.has([]byte(l)), "%q", l)
	}
}

// The gram filter in front of the automaton never rejects a line that
// holds one of hangLits, wherever in the line it starts.
func TestHangFilterKeepsEveryLiteral(t *testing.T) {
	f := hangFilter.Get()
	for _, lit := range hangLits {
		require.Greater(t, len(lit), gramLen, "%q has no two grams", lit)
		for pad := 0; pad < 4; pad++ {
			line := append(bytes.Repeat([]byte("x"), pad), lit...)
			line = append(line, " tail"...)
			assert.True(t, f.mayMatch(line), "%q at offset %d", lit, pad)
		}
	}
	assert.False(t, f.mayMatch([]byte("gpu-node-00:31002:31099 [2] NCCL INFO Channel 14/0 : 2[2] -> 3[3] via P2P/CUMEM/read")))
}

// TestNranksOf: a communicator's size is read from NCCL's INFO line only.
func TestNranksOf(t *testing.T) {
	for _, c := range []struct {
		line string
		want int
	}{
		{"gpu-node-01:31009:31203 [1] NCCL INFO ncclCommInitRank comm 0x55d2c4a1b001 rank 9 nranks 16 cudaDev 1 nvmlDev 1 busId 19000 commId 0x7c1d3e9a - Init COMPLETE", 16},
		{"h:1:2 [0] NCCL INFO comm 0x1 rank 0 nranks 8 cudaDev 0 busId 1000 - Init COMPLETE", 8},
		{"h:1:2 [0] NCCL INFO comm 0x1 rank 0 nranks 8", 8},
		{"h:1:2 [0] NCCL WARN comm 0x1 rank 0 nranks 8", -1},
		{"h:1:2 [0] NCCL INFO comm 0x1 myrank 0 nranks 8", -1},
		{"h:1:2 [0] NCCL INFO comm 0x1 rank x nranks 8", -1},
		{"h:1:2 [0] NCCL INFO comm 0x1 rank 0 nranks 8x", -1},
		{"h:1:2 [0] NCCL INFO comm 0x1 rank 0 nranks ", -1},
		{"rank 0 nranks 8 NCCL INFO", -1},
	} {
		assert.Equal(t, c.want, nranksOf([]byte(c.line)), c.line)
	}
}
