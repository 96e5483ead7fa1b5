package diagnosis

import (
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// patternCostBudget is how many times its reference's per-line cost a
// catalog pattern may take on a WARN line carrying one of its literals.
// The reference for a line is that literal followed by `.{0,200}\x00`: a
// substring search, then a bounded look at what follows, which is what a
// pattern with a literal start costs. A pattern that Go's regexp retries
// at every byte offset (no literal start: an alternation of phrases, a
// leading group or \b) costs more the longer the line: before match.go
// split them shm/enospc measured 8x, nccl-error/torch 7.6x,
// net-plugin/plugin-failed and shm/sigbus 6.9x, collective-timeout/
// watchdog-error 5x (ib-transport/flush took 10x its first alternative
// alone); now at most about 2x.
const patternCostBudget = 4

// TestPatternCost measures every shipped pattern against its reference in
// the same run, interleaved, the minimum of several short rounds each
// (contention only adds time), and fails for a pattern over budget.
func TestPatternCost(t *testing.T) {
	pad := strings.Repeat("abc def ", 16)
	once := func(f func([]byte) bool, lines [][]byte) float64 {
		n := 0
		start := time.Now()
		for n < 40 {
			for _, l := range lines {
				f(l)
				n++
			}
		}
		return float64(time.Since(start).Nanoseconds()) / float64(n)
	}
	type cost struct {
		name  string
		ratio float64
	}
	var costs []cost
	for _, p := range DefaultCatalog().pats {
		var lines [][]byte
		var refs []*regexp.Regexp
		for _, l := range p.Literals {
			lines = append(lines, []byte("gpu-node-01:31010:31107 [2] misc/x.cc:12 NCCL WARN "+pad+l+" "+pad))
			refs = append(refs, regexp.MustCompile(regexp.QuoteMeta(l)+`.{0,200}\x00`))
		}
		k := 0
		ref := func(line []byte) bool { // each line's own reference, in turn
			r := refs[k%len(refs)].Match(line)
			k++
			return r
		}
		bp, br := 1e18, 1e18
		for r := 0; r < 12; r++ {
			bp = min(bp, once(func(line []byte) bool { return p.reMatch(line, nil) }, lines))
			k = 0
			br = min(br, once(ref, lines))
		}
		costs = append(costs, cost{p.entry.ID + "/" + p.Name, bp / br})
	}
	sort.Slice(costs, func(i, j int) bool { return costs[i].ratio > costs[j].ratio })
	for i, c := range costs {
		if i < 5 {
			t.Logf("%-40s %.1fx the reference", c.name, c.ratio)
		}
		assert.LessOrEqual(t, c.ratio, float64(patternCostBudget), "%s costs %.1fx the reference per line", c.name, c.ratio)
	}
}

// TestSplitAlternativesSameAnswer: running a pattern as its branches
// answers as the whole expression on every sample and test line that
// carries one of its literals (the only lines it is run on), and on each
// line again with a word byte glued before every literal (the leading \b
// checked by hand).
func TestSplitAlternativesSameAnswer(t *testing.T) {
	lines := allTestLines(t)
	split := 0
	for _, p := range DefaultCatalog().pats {
		p.mustReady()
		if p.branches == nil {
			continue
		}
		split++
		for i, l := range lines {
			if raceEnabled && i%8 != 0 {
				continue // a sample under the race detector
			}
			for _, lit := range p.Literals {
				if !strings.Contains(l, lit) {
					continue
				}
				for _, v := range []string{l, strings.ReplaceAll(l, lit, "x"+lit), strings.ReplaceAll(l, lit, " "+lit+lit)} {
					assert.Equal(t, p.regexp().MatchString(v), p.reMatch([]byte(v), nil), "%s/%s: %q", p.entry.ID, p.Name, v)
				}
			}
		}
	}
	assert.Greater(t, split, 10, "patterns without a literal start are split")
}
