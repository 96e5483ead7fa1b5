package diagnosis

import (
	"regexp"
	"regexp/syntax"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLitCheckOf(t *testing.T) {
	tests := []struct {
		re   string
		need [][]string
		sure string
	}{
		{`Connection closed by remote peer(?: (?P<peer>\S+))?`, [][]string{{"Connection closed by remote peer"}}, "Connection closed by remote peer"},
		{`abc`, [][]string{{"abc"}}, "abc"},
		{`abc.*`, [][]string{{"abc"}}, "abc"},
		{`abc\b`, [][]string{{"abc"}}, ""},
		{`abc$`, [][]string{{"abc"}}, ""},
		{`ibv_x (?:failed|returned) (?:19\b|No such device)`, [][]string{{"ibv_x "}, {"failed", "returned"}, {"19", "No such device"}}, ""},
		{`(?:[Rr]ead error|remote=)x`, [][]string{{"ead error", "remote="}}, ""},
		{`(?i)abc`, nil, ""},                       // case folded
		{`é+abc`, [][]string{{"abc"}}, ""},         // ASCII only
		{`(?:ab|)cd`, [][]string{{"cd"}}, ""},      // an empty alternative
		{`x(?:abcd)+y?`, [][]string{{"abcd"}}, ""}, // "x" is too short to be worth a search
		{`a(?:bcd|efg)z`, [][]string{{"bcd", "efg"}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.re, func(t *testing.T) {
			tr, err := syntax.Parse(tt.re, syntax.Perl)
			require.NoError(t, err)
			c := litCheckOf(tr)
			var need [][]string
			for _, set := range c.need {
				var ss []string
				for _, s := range set {
					ss = append(ss, string(s))
				}
				need = append(need, ss)
			}
			assert.Equal(t, tt.need, need)
			assert.Equal(t, tt.sure, string(c.sure))
		})
	}
}

// TestLitCheckSameAnswer: where the literals decide (litCheck), the
// answer is the expression's, for every expression the matcher runs (the
// patterns, their branches, the negative patterns) on every sample and
// test line, and on each cut short at every literal (a line with a
// literal but not what follows it).
func TestLitCheckSameAnswer(t *testing.T) {
	type expr struct {
		name string
		re   *regexp.Regexp
		lits litCheck
	}
	var exprs []expr
	for _, p := range DefaultCatalog().pats {
		p.mustReady()
		p.entry.mustReady()
		name := p.entry.ID + "/" + p.Name
		if p.branches == nil {
			exprs = append(exprs, expr{name, p.re, p.reLits})
		}
		for _, b := range p.branches {
			if !b.bound {
				exprs = append(exprs, expr{name + " branch", b.re, b.lits})
			}
		}
		for _, g := range append(append([]guard{}, p.not...), p.entry.not...) {
			exprs = append(exprs, expr{name + " not", g.re, g.lits})
		}
	}
	var lines []string
	for i, l := range allTestLines(t) {
		if raceEnabled && i%8 != 0 {
			continue // a sample under the race detector
		}
		lines = append(lines, l)
	}
	decided := 0
	for _, e := range exprs {
		var variants []string
		for _, l := range lines {
			variants = append(variants, l)
			for _, set := range e.lits.need {
				for _, s := range set {
					if i := strings.Index(l, string(s)); i >= 0 {
						variants = append(variants, l[:i+len(s)])
					}
				}
			}
		}
		for _, v := range variants {
			if got, known := e.lits.decide([]byte(v)); known {
				decided++
				assert.Equal(t, e.re.MatchString(v), got, "%s: %q on %q", e.name, e.re, v)
			}
		}
	}
	assert.Greater(t, decided, 1000, "the literals decide most lines")
}
