package diagnosis

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// allTestLines returns every line of every log under testdata and of every
// sample of the shipped catalog.
func allTestLines(t testing.TB) []string {
	t.Helper()
	var lines []string
	for _, e := range DefaultCatalog().Entries() {
		for _, s := range append(append([]string{}, e.Samples.Match...), e.Samples.NoMatch...) {
			lines = append(lines, strings.Split(s, "\n")...)
		}
	}
	logs, err := filepath.Glob("testdata/*/*.log")
	require.NoError(t, err)
	require.NotEmpty(t, logs)
	for _, p := range logs {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		lines = append(lines, raceSample(strings.Split(string(b), "\n"))...)
	}
	return lines
}

// logLines returns the lines of the log at path (without their newlines).
func logLines(t testing.TB, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	require.NoError(t, sc.Err(), path)
	return lines
}

// raceSample returns every line without the race detector and every
// raceStride-th line under it: the sweeps over every testdata line are
// pattern-by-line loops with nothing concurrent in them, which -race makes
// 10 to 20 times slower (the package then ran past go test's timeout).
// make unit runs this package once more without -race, so CI checks every
// line too.
func raceSample(lines []string) []string {
	if !raceEnabled {
		return lines
	}
	out := make([]string, 0, len(lines)/raceStride+1)
	for i := 0; i < len(lines); i += raceStride {
		out = append(out, lines[i])
	}
	return out
}

const raceStride = 8

// mergedLines are lines an interleaving of ranks produces: a healthy INFO
// line with another line pasted before or after it on the same line, and
// every literal of the catalog inside an INFO line (at the start, in the
// middle, at the end, alone).
func mergedLines(t testing.TB, c *Catalog, lines []string) []string {
	t.Helper()
	const info = "gpu-node-01:31010:31107 [2] NCCL INFO Channel 25/0 : 10[2] -> 11[3] via P2P/CUMEM/read"
	var out []string
	for _, l := range lines {
		out = append(out, info+l, l+info, info+" "+l+"\r"+info)
	}
	for _, p := range c.pats {
		for _, lit := range p.Literals {
			out = append(out, lit, info+lit, lit+info, info[:40]+lit+info[40:], lit[1:], lit[:len(lit)-1])
		}
	}
	return out
}

// TestGramFilterSound: on every test line (and merged variants) for which
// the automaton finds a candidate, the catalog's gram filter passes it; on
// lines with no candidate it may pass or not. For the shipped catalog,
// the 10x one and a small one.
func TestGramFilterSound(t *testing.T) {
	lines := allTestLines(t)
	for _, pc := range perfCatalogs(t) {
		c := pc.c
		stamp := make([]uint32, c.automaton().npattern)
		all := append(append([]string{}, lines...), mergedLines(t, c, lines)...)
		for i, l := range all {
			cand := c.automaton().scan([]byte(l), stamp, uint32(i+1), nil)
			if len(cand) > 0 {
				// The wide filter (the scan of a chunk) holds every
				// literal; filter all but the windowed markers', which
				// feedAll reads on their own (sideLine).
				require.True(t, c.wide.mayMatch([]byte(l)), "%s: %q has candidates %v but the filter rejects it", pc.name, l, cand)
			}
		}
	}
}

// TestGramFilterRejectsHealthyInfo keeps the filter useful: with the
// markers of a healthy job seen, most healthy INFO lines are rejected
// before the automaton (the filter is not silently "pass all"). What
// passes is mostly lines each process prints once at start-up (its
// Bootstrap interface, its net plugin look-up: 16 processes here), which
// patterns' literals hold in full.
func TestGramFilterRejectsHealthyInfo(t *testing.T) {
	lines, _ := perfLines(t)
	m := NewMatcher(Facts{})
	for _, l := range lines {
		m.FeedAll(l)
	}
	require.False(t, m.filter.all)
	pass := 0
	for _, l := range lines {
		if m.filter.mayMatch(l) {
			pass++
		}
	}
	assert.Less(t, pass*8, len(lines), "%d of %d healthy lines pass the filter", pass, len(lines))
}

// TestGramFilterShortLiteral: a catalog with a literal shorter than a gram
// cannot be filtered, and still matches it.
func TestGramFilterShortLiteral(t *testing.T) {
	c, err := NewCatalog([]Entry{{ID: "x", Title: "t", Cause: "c", Fix: "f",
		Patterns: []Pattern{{Name: "p", Re: `\bEIO\b`}}}})
	require.NoError(t, err)
	assert.True(t, c.filter.all)
	m := NewMatcherWith(c, Facts{})
	ds := m.FeedAll([]byte("host:1:1 [0] NCCL INFO call failed: EIO"))
	require.Len(t, ds, 1)
	assert.Equal(t, "x", ds[0].ID)
}

// feedBoth feeds lines to a matcher with the filters and to one without,
// and requires the same FeedAll result for every line and the same
// Diagnoses at the end; it returns the matcher with the filters (and the
// memo).
func feedBoth(t *testing.T, c *Catalog, f Facts, name string, lines []string) *Matcher {
	t.Helper()
	fast, slow := NewMatcherWith(c, f), NewMatcherWith(c, f)
	slow.nofilter = true
	for i, l := range lines {
		a, b := fast.FeedAll([]byte(l)), slow.FeedAll([]byte(l))
		require.Equal(t, b, a, "%s line %d: %q", name, i+1, l)
	}
	require.Equal(t, slow.Diagnoses(), fast.Diagnoses(), "%s: diagnoses", name)
	require.Nil(t, slow.memo, "the reference matcher has no memo")
	return fast
}

// TestFastPathSameResults runs every testdata log, every sample (under its
// facts and under none), and logs of merged lines through the filtered
// and the unfiltered matcher: results must be identical.
func TestFastPathSameResults(t *testing.T) {
	logs, err := filepath.Glob("testdata/*/*.log")
	require.NoError(t, err)
	require.Greater(t, len(logs), 100)
	facts := []Facts{{}, {Known: true, MemlockAdequate: true, ShmBytes: 1 << 26}, {Known: true, NoRDMA: true}}
	c := DefaultCatalog()
	for _, p := range logs {
		lines := logLines(t, p)
		for _, f := range facts {
			feedBoth(t, c, f, p, lines)
		}
		// The same log with a healthy multi-node INFO burst first (the
		// markers seen before the failure, so the matcher's own filter
		// is in use when the failure lines arrive).
		healthy, _ := perfLines(t)
		var pre []string
		for _, h := range healthy {
			pre = append(pre, string(h))
		}
		feedBoth(t, c, Facts{}, p+" after a healthy burst", append(pre, lines...))
	}
	for _, e := range c.Entries() {
		for _, s := range append(append([]string{}, e.Samples.Match...), e.Samples.NoMatch...) {
			feedBoth(t, c, e.SampleFacts.Facts(), e.ID+" sample", strings.Split(s, "\n"))
			feedBoth(t, c, Facts{}, e.ID+" sample", strings.Split(s, "\n"))
		}
	}
	all := allTestLines(t)
	merged := mergedLines(t, c, all)
	for i := 0; i < len(merged); i += 500 {
		feedBoth(t, c, Facts{}, "merged", merged[i:min(i+500, len(merged))])
	}
	big := perfCatalog(t, 10)
	feedBoth(t, big, Facts{}, "10x catalog, merged", merged[:min(2000, len(merged))])
}

// FuzzFastPath: for any two lines fed in turn (after a healthy burst),
// the filtered and unfiltered matchers agree.
func FuzzFastPath(f *testing.F) {
	for _, l := range corpusLines(f) {
		f.Add(l, []byte("gpu-node-01:31010:31107 [2] NCCL INFO Channel 25/0 : 10[2] -> 11[3] [receive] via NET/IB/0"))
	}
	healthy, _ := perfLines(f)
	f.Fuzz(func(t *testing.T, a, b []byte) {
		fast, slow := NewMatcher(Facts{}), NewMatcher(Facts{})
		slow.nofilter = true
		for _, l := range append(append([][]byte{a}, healthy...), b, a) {
			if x, y := fast.FeedAll(l), slow.FeedAll(l); !assert.ObjectsAreEqual(y, x) {
				t.Fatalf("line %q: fast %v, slow %v", l, x, y)
			}
		}
		if x, y := fast.Diagnoses(), slow.Diagnoses(); !assert.ObjectsAreEqual(y, x) {
			t.Fatalf("fast %v, slow %v", x, y)
		}
	})
}

// BenchmarkGramFilter measures the gram filter alone over the healthy
// lines, with the markers of a healthy job seen (the steady state of an
// INFO burst).
func BenchmarkGramFilter(b *testing.B) {
	lines, mean := perfLines(b)
	m := NewMatcher(Facts{})
	for _, l := range lines {
		m.FeedAll(l)
	}
	b.SetBytes(int64(mean))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m.filter.mayMatch(lines[i%len(lines)])
	}
}

// BenchmarkGramFilterChunk measures the filter over a chunk of healthy
// lines (FeedReader's case), with the markers of a healthy job seen; the
// scalar sub-benchmark is the reference of the vector path.
func BenchmarkGramFilterChunk(b *testing.B) {
	lines, _ := perfLines(b)
	m := NewMatcher(Facts{})
	for _, l := range lines {
		m.FeedAll(l)
	}
	var chunk []byte
	for len(chunk) < feedChunk {
		for _, l := range lines {
			if m.filter.firstHit(l) < 0 {
				chunk = append(append(chunk, l...), '\n')
			}
		}
	}
	b.SetBytes(int64(len(chunk)))
	for i := 0; i < b.N; i++ {
		if m.filter.firstHit(chunk) >= 0 {
			b.Fatal("a line that does not pass passed")
		}
	}
}
