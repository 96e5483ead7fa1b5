package diagnosis

import (
	"fmt"
	"path/filepath"
	"regexp"
	"regexp/syntax"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMemoSameResults feeds every testdata log with its lines repeated
// (each line twice in a row, then the whole log again, as a failing job
// repeats its WARN lines) through a matcher with the memo and one without
// (the unfiltered reference, which has no tail answers either): every
// FeedAll and the final diagnoses must be identical, and the memo and
// the tail answers must have been used.
func TestMemoSameResults(t *testing.T) {
	logs, err := filepath.Glob("testdata/*/*.log")
	require.NoError(t, err)
	require.Greater(t, len(logs), 100)
	c := DefaultCatalog()
	hits, tails := 0, 0
	for i, p := range logs {
		if raceEnabled && i%8 != 0 {
			continue // a sample under the race detector
		}
		var lines []string
		for _, l := range logLines(t, p) {
			lines = append(lines, l, l)
		}
		lines = append(lines, lines...)
		for _, f := range []Facts{{}, {Known: true, MemlockAdequate: true, ShmBytes: 1 << 26}} {
			fast := feedBoth(t, c, f, p, lines)
			if fast.memo != nil {
				for _, e := range fast.memo.slot {
					if e.known != 0 {
						hits++
					}
				}
				for _, e := range fast.tails {
					if e.re != nil {
						tails++
					}
				}
			}
		}
	}
	assert.Greater(t, hits, 100, "memo slots that remembered a match")
	assert.Greater(t, tails, 100, "expression answers remembered by tail (tails.go)")
}

// TestMemoSlotReplaced: a line that lands in an occupied slot replaces
// the one there, and each is still matched right afterwards.
func TestMemoSlotReplaced(t *testing.T) {
	var tab memoTable
	a := []byte("host:1:2 [0] misc/socket.cc:50 NCCL WARN socketProgress: Connection closed by remote peer node-b<45678>")
	e, ok := tab.lookup(a)
	require.False(t, ok)
	e.store(a, []int32{3, 5}, false)
	e2, ok := tab.lookup(a)
	require.True(t, ok)
	require.Same(t, e, e2)
	// Force b into a's slot: its hash differs, so the slot is not a hit.
	b := []byte("host:1:2 [0] NCCL WARN something else")
	e.hash = hashBytes(b) + 1
	_, ok = tab.lookup(a)
	require.False(t, ok, "a slot whose hash differs is not a hit")
	e.hash = hashBytes(a)
	e.line = append(e.line[:0], b...)
	_, ok = tab.lookup(a)
	require.False(t, ok, "a slot holding other bytes is not a hit")
}

// TestExprStringSameAnswer: every expression of the catalog (patterns and
// negative patterns) and every sub-expression of them, written back by
// exprString, matches exactly the lines the original does, over every
// test line and variants of them.
func TestExprStringSameAnswer(t *testing.T) {
	var exprs []string
	for _, e := range DefaultCatalog().Entries() {
		exprs = append(exprs, e.Not...)
		for _, p := range e.Patterns {
			exprs = append(exprs, p.Re)
			exprs = append(exprs, p.Not...)
		}
	}
	exprs = append(exprs, `(?:abcde|fghij)\x{d800}`, `(?i)abc[^x]*\d{2,}?$`, `^a|(?m:^b$)|\Bc\b|(?s:.)x{3}|y{2,}|(?:)`, `[\p{Greek}]+é`)
	// Invalid UTF-8 reads as U+FFFD, which a surrogate escape must not
	// become.
	odd := []string{"abcde\xff", "fghij\xef\xbf\xbd", "abcde\xed\xa0\x80"}
	lines := append(allTestLines(t), odd...)
	samples := odd
	for _, e := range DefaultCatalog().Entries() {
		samples = append(append(samples, e.Samples.Match...), e.Samples.NoMatch...)
	}
	same := func(s *syntax.Regexp, on []string) {
		orig := regexp.MustCompile(s.String())
		mine, err := regexp.Compile(exprString(s))
		require.NoError(t, err, "%s -> %s", s, exprString(s))
		for _, l := range on {
			for _, v := range []string{l, strings.ToUpper(l), "\n" + l + "\n"} {
				require.Equal(t, orig.FindStringIndex(v), mine.FindStringIndex(v), "%s vs %s on %q", s, exprString(s), v)
			}
		}
	}
	var subs int
	for _, x := range exprs {
		tree, err := syntax.Parse(x, syntax.Perl)
		require.NoError(t, err, x)
		// The whole expression and the branches the matcher compiles,
		// over every test line; every sub-expression over the samples.
		var sampled []string
		step := 16 // the regular expressions of the reference are slow
		if raceEnabled {
			step = 128
		}
		for i := 0; i < len(lines); i += step {
			sampled = append(sampled, lines[i])
		}
		sampled = append(sampled, odd...)
		same(tree, sampled)
		for _, b := range distribute(tree) {
			same(b, sampled)
		}
		var walk func(*syntax.Regexp)
		walk = func(s *syntax.Regexp) {
			subs++
			if subs%4 == 0 || !raceEnabled {
				same(s, samples)
			}
			for _, c := range s.Sub {
				walk(c)
			}
		}
		walk(tree)
	}
	assert.Greater(t, subs, 500)
}

// TestMemoRepeatsAtTheCaps: lines repeated while the counting caps are
// reached (more processes, hosts and texts than a matcher keeps) count
// as they do without the memo.
func TestMemoRepeatsAtTheCaps(t *testing.T) {
	fast, slow := NewMatcher(Facts{}), NewMatcher(Facts{})
	slow.nofilter = true
	texts := []string{"NET/IB : Got completion from peer 10.1.0.2<53412> with status=12 opcode=0 len=0 vendor err 129", "socketProgress: Connection closed by remote peer node-b<45678>"}
	for i := 0; i < 3*maxProcs; i++ {
		for r := 0; r < 2; r++ {
			l := []byte(fmt.Sprintf("node-%d:%d:%d [0] misc/x.cc:1 NCCL WARN %s %d", i%(2*maxHosts), 1000+i, 7, texts[i%2], i%(maxTexts+7)))
			require.Equal(t, slow.FeedAll(l), fast.FeedAll(l), "line %q", l)
		}
	}
	d := fast.Diagnoses()
	require.Equal(t, slow.Diagnoses(), d)
	require.NotEmpty(t, d)
	assert.True(t, d[0].CountCapped || d[0].HostsCapped, "the caps were reached: %+v", d[0])
}
