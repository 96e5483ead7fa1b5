package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/ncclrun/ncclrun/diagnosis"
)

// benchNodes and benchPerNode are the job of the benchmark: a thousand
// nodes of eight ranks, one rank of which (benchStalled) never joined.
const (
	benchNodes   = 1000
	benchPerNode = 8
	benchStalled = 4003
)

// writeBenchReports writes one --report a node, as run writes them on a
// hang: the node's counters, its ranks' last lines and the diagnosis.
func writeBenchReports(tb testing.TB, dir string) []string {
	tb.Helper()
	world := benchNodes * benchPerNode
	var names []string
	for n := 0; n < benchNodes; n++ {
		host := fmt.Sprintf("node%04d", n)
		v := diagnosis.HangView{Node: host, World: world, PerNode: benchPerNode, TimedOut: true,
			Ranks: []diagnosis.RankSpan{{First: n * benchPerNode, End: (n + 1) * benchPerNode, Host: host}},
			Last:  map[string][]string{}}
		for r := n * benchPerNode; r < (n+1)*benchPerNode; r++ {
			line := fmt.Sprintf("[PG ID 0 PG GUID 0(default_pg) Rank %d]  failure detected by watchdog at work sequence id: 78 PG status: last enqueued work: 79, last completed work: 77", r)
			rec := diagnosis.HangRecord{Kind: "timeout", PG: "0(default_pg)", Rank: r, Host: host, Seq: 78, Counted: true, Enq: 79, Comp: 77, Op: "ALLREDUCE", Numel: 1 << 20, HasSize: true, Line: line}
			if r == benchStalled {
				rec = diagnosis.HangRecord{Kind: "status", PG: "0(default_pg)", Rank: r, Host: host, Counted: true, Enq: 77, Comp: 77, Line: line}
			}
			v.Records = append(v.Records, rec)
			v.Seen = append(v.Seen, r)
			for k := 0; k < 10; k++ {
				v.Last[fmt.Sprint(r)] = append(v.Last[fmt.Sprint(r)], fmt.Sprintf("step %d loss 2.%03d", 9000+k, r%1000))
			}
		}
		b, err := json.Marshal(map[string]any{
			"preflight": map[string]any{}, "diagnoses": []map[string]any{{"id": "collective-timeout", "first_line": "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=78, OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, Timeout(ms)=600000) ran for 600100 milliseconds before timing out."}},
			"hang_view": v, "exit_code": 1, "command": []string{"torchrun", "--nnodes", fmt.Sprint(benchNodes), "--nproc_per_node", fmt.Sprint(benchPerNode), "train.py"},
		})
		if err != nil {
			tb.Fatal(err)
		}
		p := filepath.Join(dir, host+".json")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			tb.Fatal(err)
		}
		names = append(names, p)
	}
	return names
}

// explainReports is explain's work on the reports: read, merge, name.
func explainReports(tb testing.TB, names []string) *diagnosis.Hang {
	m := diagnosis.NewMatcher(diagnosis.Facts{})
	var ji jobInput
	for _, n := range names {
		if err := ji.explainInput(m, n, nil); err != nil {
			tb.Fatal(err)
		}
	}
	ji.flush(m)
	_ = m.Diagnoses()
	return ji.hang()
}

// BenchmarkExplainThousandReports is explain over a thousand nodes'
// reports (docs/hangs.md has the figure): reading and decoding them,
// merging the views and naming the stalled rank.
func BenchmarkExplainThousandReports(b *testing.B) {
	names := writeBenchReports(b, b.TempDir())
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		h := explainReports(b, names)
		if len(h.Stalled) != 1 || h.Stalled[0].Rank != benchStalled {
			b.Fatalf("stalled %+v", h.Stalled)
		}
	}
}
