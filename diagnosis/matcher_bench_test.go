package diagnosis

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// perfLines returns the lines of the healthy INFO-heavy 2x8 log (the
// bulk of what a healthy job prints with NCCL_DEBUG=INFO) and their mean
// length.
func perfLines(tb testing.TB) ([][]byte, int) {
	tb.Helper()
	data, err := os.ReadFile("testdata/healthy/infoheavy-2x8.log")
	if err != nil {
		tb.Fatal(err)
	}
	var out [][]byte
	total := 0
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		out = append(out, append([]byte(nil), sc.Bytes()...))
		total += len(sc.Bytes()) + 1
	}
	if len(out) == 0 {
		tb.Fatal("no lines")
	}
	return out, total / len(out)
}

// perfMangle turns a literal into one of the same length and byte mix
// that occurs nowhere in NCCL output: the bytes in reverse, then k.
func perfMangle(l string, k int) string {
	r := []byte(l)
	for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
		r[i], r[j] = r[j], r[i]
	}
	return string(r) + "~" + strconv.Itoa(k)
}

// perfCatalog is the shipped catalog grown to copies times its size: the
// shipped entries themselves (so the healthy log hits the same literals
// and regular expressions) plus copies-1 copies of each with other ids and
// mangled literals and expressions, as a catalog ten times larger would
// add causes with literals of their own.
func perfCatalog(tb testing.TB, copies int) *Catalog {
	tb.Helper()
	base := DefaultCatalog().Entries()
	all := append([]Entry(nil), base...)
	for k := 1; k < copies; k++ {
		for _, e := range base {
			e.ID = fmt.Sprintf("%s-x%d", e.ID, k)
			if e.AdequateID != "" {
				e.AdequateID = fmt.Sprintf("%s-x%d", e.AdequateID, k)
			}
			e.After = nil
			pats := make([]Pattern, len(e.Patterns))
			for i, p := range e.Patterns {
				derived, ok := derivedLiterals(p.Re)
				require.True(tb, ok, p.Re)
				var alts []string
				for _, l := range derived {
					alts = append(alts, regexp.QuoteMeta(perfMangle(l, k)))
				}
				p.Re = strings.Join(alts, "|")
				p.Not = nil
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

// perfFirst is the catalog of the first n shipped entries that stand on
// their own (no adequate_id target needed).
func perfFirst(tb testing.TB, n int) *Catalog {
	tb.Helper()
	var keep []Entry
	for _, e := range DefaultCatalog().Entries() {
		if len(keep) == n {
			break
		}
		if e.AdequateID != "" || len(e.Patterns) == 0 || len(e.After) > 0 {
			continue
		}
		keep = append(keep, e)
	}
	c, err := NewCatalog(keep)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

type perfCat struct {
	name string
	c    *Catalog
}

func perfCatalogs(tb testing.TB) []perfCat {
	return []perfCat{
		{"entries=10", perfFirst(tb, 10)},
		{"entries=shipped", DefaultCatalog()},
		{"entries=10x", perfCatalog(tb, 10)},
	}
}

// BenchmarkMatcherFeedHealthy feeds the healthy INFO-heavy log line by
// line to matchers over 10 entries, the shipped catalog and a catalog ten
// times its size. MB/s is the throughput of the tap's consumer; the
// target is that it stays within 10% across the three.
func BenchmarkMatcherFeedHealthy(b *testing.B) {
	lines, mean := perfLines(b)
	for _, pc := range perfCatalogs(b) {
		b.Run(fmt.Sprintf("%s(%d)", pc.name, len(pc.c.Entries())), func(b *testing.B) {
			m := NewMatcherWith(pc.c, Facts{})
			b.SetBytes(int64(mean))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				m.FeedAll(lines[i%len(lines)])
			}
		})
	}
}

// BenchmarkPrefilterScan measures the Aho-Corasick prefilter alone over
// the same lines (the per-byte cost every relayed byte pays).
func BenchmarkPrefilterScan(b *testing.B) {
	lines, mean := perfLines(b)
	for _, pc := range perfCatalogs(b) {
		b.Run(fmt.Sprintf("%s(%d)", pc.name, len(pc.c.Entries())), func(b *testing.B) {
			stamp := make([]uint32, pc.c.automaton().npattern)
			var cand []int32
			b.SetBytes(int64(mean))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				cand = pc.c.automaton().scan(lines[i%len(lines)], stamp, uint32(i+1), cand[:0])
			}
		})
	}
}

// BenchmarkMatcherFeedFailing feeds a failing job's log (the memlock
// corpus case: INFO lines, then WARN lines that match) to a fresh matcher
// per op; MB/s is the log's bytes.
func BenchmarkMatcherFeedFailing(b *testing.B) {
	data, err := os.ReadFile("testdata/corpus/memlock-32.log")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		m := NewMatcher(Facts{})
		if err := FeedReader(m, bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
		if len(m.Diagnoses()) == 0 {
			b.Fatal("memlock log not diagnosed")
		}
	}
}

// BenchmarkCatalogCompile is what the first NewMatcher costs at start-up
// (DefaultCatalog compiles the embedded catalog once per process).
func BenchmarkCatalogCompile(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := ParseCatalogFS(shippedCatalog); err != nil {
			b.Fatal(err)
		}
	}
}

// TestPerfCatalogs keeps the benchmark catalogs honest: they are the
// sizes they claim, and over the healthy log the grown catalog finds no
// more candidates than the shipped one (its extra literals never occur)
// and no diagnosis.
func TestPerfCatalogs(t *testing.T) {
	lines, _ := perfLines(t)
	shipped := DefaultCatalog()
	big := perfCatalog(t, 10)
	if got, want := len(big.Entries()), 10*len(shipped.Entries()); got != want {
		t.Fatalf("10x catalog has %d entries, want %d", got, want)
	}
	if got := len(perfFirst(t, 10).Entries()); got != 10 {
		t.Fatalf("first-10 catalog has %d entries", got)
	}
	count := func(c *Catalog) int {
		stamp := make([]uint32, c.automaton().npattern)
		n := 0
		for i, l := range lines {
			n += len(c.automaton().scan(l, stamp, uint32(i+1), nil))
		}
		return n
	}
	if s, g := count(shipped), count(big); s != g {
		t.Fatalf("healthy log: %d candidates with the shipped catalog, %d with the 10x one", s, g)
	}
	for name, c := range map[string]*Catalog{"10x": big, "first-10": perfFirst(t, 10)} {
		m := NewMatcherWith(c, Facts{})
		for _, l := range lines {
			m.FeedAll(l)
		}
		if ds := m.Diagnoses(); len(ds) != 0 {
			t.Fatalf("healthy log diagnosed by the %s catalog: %s", name, ds[0].ID)
		}
	}
}
