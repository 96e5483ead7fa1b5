package diagnosis

import (
	"bytes"
	"os"
	"testing"
)

// The matcher's throughput over catalogs of 10 entries, the shipped one
// and ten times its size is measured by BenchmarkMatcherFeedHealthy and
// BenchmarkPrefilterScan (matcher_bench_test.go, with TestPerfCatalogs
// keeping those catalogs honest).

// BenchmarkExplainCorpus runs Explain over every corpus log.
func BenchmarkExplainCorpus(b *testing.B) {
	var logs [][]byte
	for _, c := range []string{"shm-02", "none-33", "cuda-oom-24", "collective-timeout-16"} {
		data, err := os.ReadFile("testdata/corpus/" + c + ".log")
		if err != nil {
			b.Fatal(err)
		}
		logs = append(logs, data)
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		for _, l := range logs {
			if _, err := Explain(bytes.NewReader(l), Facts{}); err != nil {
				b.Fatal(err)
			}
		}
	}
}
