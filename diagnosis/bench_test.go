package diagnosis

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"regexp"
	"testing"
)

// benchLines are realistic NCCL INFO-heavy lines (a healthy 2x8 job).
func benchLines(b *testing.B) [][]byte {
	data, err := os.ReadFile("testdata/healthy/infoheavy-2x8.log")
	if err != nil {
		b.Fatal(err)
	}
	var out [][]byte
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		out = append(out, append([]byte(nil), sc.Bytes()...))
	}
	return out
}

func reverse(s string) string {
	r := []byte(s)
	for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
		r[i], r[j] = r[j], r[i]
	}
	return string(r)
}

// syntheticCatalog is the shipped catalog plus copies-1 synthetic copies
// of every entry with other ids and other literals (reversed, numbered),
// i.e. copies times the shipped size.
func syntheticCatalog(tb testing.TB, copies int) *Catalog {
	base := DefaultCatalog().Entries()
	all := append([]Entry(nil), base...)
	for k := 1; k < copies; k++ {
		for _, e := range base {
			e.ID = fmt.Sprintf("%s-syn%d", e.ID, k)
			if e.AdequateID != "" {
				e.AdequateID = fmt.Sprintf("%s-syn%d", e.AdequateID, k)
			}
			pats := make([]Pattern, len(e.Patterns))
			for i, p := range e.Patterns {
				lits := make([]string, len(p.Literals))
				for j, l := range p.Literals {
					lits[j] = fmt.Sprintf("%s%d", reverse(l), k)
				}
				p.Literals = lits
				p.Re = regexp.QuoteMeta(lits[0])
				pats[i] = p
			}
			e.Patterns = pats
			all = append(all, e)
		}
	}
	c, err := NewCatalog(all)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

func smallCatalog(tb testing.TB, n int) *Catalog {
	es := DefaultCatalog().Entries()
	var keep []Entry
	for _, e := range es {
		if len(keep) == n {
			break
		}
		if e.AdequateID != "" || len(e.Patterns) == 0 {
			continue // keep it self-contained
		}
		keep = append(keep, e)
	}
	c, err := NewCatalog(keep)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// BenchmarkFeed feeds healthy INFO-heavy NCCL lines; ns/op is per line.
// Compare the three catalogs: throughput should stay flat.
func BenchmarkFeed(b *testing.B) {
	lines := benchLines(b)
	var total int
	for _, l := range lines {
		total += len(l)
	}
	cats := []struct {
		name string
		c    *Catalog
	}{
		{"entries=10", smallCatalog(b, 10)},
		{"entries=shipped", DefaultCatalog()},
		{"entries=10x", syntheticCatalog(b, 10)},
	}
	for _, cc := range cats {
		b.Run(fmt.Sprintf("%s(%d)", cc.name, len(cc.c.Entries())), func(b *testing.B) {
			m := NewMatcherWith(cc.c, Facts{})
			b.SetBytes(int64(total / len(lines)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				m.Feed(lines[i%len(lines)])
			}
		})
	}
}

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

// TestSyntheticCatalogsLoad keeps the benchmark catalogs honest: they
// compile, and the healthy log gives no diagnosis with any of them.
func TestSyntheticCatalogsLoad(t *testing.T) {
	data, err := os.ReadFile("testdata/healthy/infoheavy-2x8.log")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []*Catalog{smallCatalog(t, 10), syntheticCatalog(t, 10)} {
		m := NewMatcherWith(c, Facts{})
		if err := FeedReader(m, bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
		if ds := m.Diagnoses(); len(ds) != 0 {
			t.Fatalf("healthy log diagnosed with %d entries: %v", len(c.Entries()), ds[0].ID)
		}
	}
	if n := len(syntheticCatalog(t, 10).Entries()); n != 10*len(DefaultCatalog().Entries()) {
		t.Fatalf("10x catalog has %d entries", n)
	}
}
