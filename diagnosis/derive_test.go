package diagnosis

import (
	"regexp/syntax"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDerivedLiterals: the literals of an expression are strings every
// match holds, expanded from small classes and alternations, and chosen
// among a concatenation's parts by how rarely healthy NCCL lines hold
// them.
func TestDerivedLiterals(t *testing.T) {
	for _, c := range []struct {
		re   string
		want []string // nil: none
	}{
		{`Call to ibv_reg_mr failed`, []string{"Call to ibv_reg_mr failed"}},
		{`NCCL [Ee]rror \d+:`, []string{"NCCL Error ", "NCCL error "}},
		{`(?i)oops!`, []string{"OOPS!", "OOPs!", "OOPſ!", "OOpS!", "OOps!", "OOpſ!", "OoPS!", "OoPs!", "OoPſ!", "OopS!", "Oops!", "Oopſ!", "oOPS!", "oOPs!", "oOPſ!", "oOpS!", "oOps!", "oOpſ!", "ooPS!", "ooPs!", "ooPſ!", "oopS!", "oops!", "oopſ!"}},
		{`\bnNodes 1\b|\d\] via (?:P2P|SHM)/`, []string{"0] via P2P/", "0] via SHM/", "1] via P2P/", "1] via SHM/", "2] via P2P/", "2] via SHM/", "3] via P2P/", "3] via SHM/", "4] via P2P/", "4] via SHM/", "5] via P2P/", "5] via SHM/", "6] via P2P/", "6] via SHM/", "7] via P2P/", "7] via SHM/", "8] via P2P/", "8] via SHM/", "9] via P2P/", "9] via SHM/", "nNodes 1"}},
		// Of a concatenation, the part healthy INFO lines hold least:
		// not "NCCL INFO", which every one of them holds.
		{`NCCL INFO .*Got completion from peer`, []string{"Got completion from peer"}},
		{`(?:abc)+ defgh`, []string{" defgh"}},
		{`x{2,}yyyy`, []string{"yyyy"}},
		{`a?`, nil},
		{`.*`, nil},
		{`foo|.*bar`, []string{"bar", "foo"}},
		{`foo|x*`, nil},
		// (?i) folds k to the Kelvin sign and s to the long s as well.
		{`(?i)ks!`, []string{"KS!", "Ks!", "K\u017f!", "kS!", "ks!", "k\u017f!", "\u212aS!", "\u212as!", "\u212a\u017f!"}},
		// U+FFFD matches any invalid byte of a line: no literal holds those.
		{`\x{FFFD}abcdef`, []string{"abcdef"}},
		{`[\x{FFFD}a]bcdef`, []string{"bcdef"}},
	} {
		got, ok := derivedLiterals(c.re)
		if c.want == nil {
			assert.False(t, ok, "%s: %q", c.re, got)
			continue
		}
		require.True(t, ok, c.re)
		assert.Equal(t, c.want, got, c.re)
	}
}

// TestShippedLiteralsFilter: every literal derived from the shipped
// catalog is long enough for the gram filter, which would otherwise pass
// every line to the automaton.
func TestShippedLiteralsFilter(t *testing.T) {
	for _, p := range DefaultCatalog().pats {
		for _, l := range p.Literals {
			assert.GreaterOrEqual(t, len(l), gramLen+1, "%s/%s: %q", p.entry.ID, p.Name, l)
		}
		assert.True(t, p.gramsOK, "%s/%s", p.entry.ID, p.Name)
	}
}

// derivedLiterals is literalsOf of expression expr, as the catalog
// parses it; false where expr does not parse.
func derivedLiterals(expr string) ([]string, bool) {
	t, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return nil, false
	}
	return literalsOf(t)
}
