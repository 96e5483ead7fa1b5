package diagnosis

import (
	"bytes"
	"regexp/syntax"
)

// A candidate line carries one of its pattern's literals, and for most of
// them the expression then answers no: a WARN line carries "ibv_modify_qp"
// for every pattern that reads what ibv_modify_qp failed with, and all but
// one of them look for another errno. Each run of Go's regexp costs about
// a microsecond, a substring search about ten nanoseconds, so an
// expression's literals are also tested on their own where they decide
// the answer:
//   - need: every match contains one string of each set (the literals of
//     a concatenation's parts, an alternation's literals taken together),
//     so a line that lacks all of one set's does not match;
//   - sure: the expression is a literal followed by parts that may match
//     the empty string ("Connection closed by remote peer(?: (?P<peer>...))?"),
//     so a line matches exactly when it contains that literal.
// The answer is the expression's by construction (TestLitCheckSameAnswer
// compares them on every sample and test line).

// litCheck is what an expression's literals decide (see above).
type litCheck struct {
	need [][][]byte
	sure []byte
}

const (
	maxNeedSets = 4 // sets tested at most: the first ones, in the expression's order
	maxNeedAlts = 8 // strings a set may have
	minNeedLen  = 2 // a set with a shorter string is not worth a search
)

// litCheckOf is t's litCheck (t parsed as regexp.Compile parses it).
func litCheckOf(t *syntax.Regexp) litCheck {
	for t.Op == syntax.OpCapture {
		t = t.Sub[0]
	}
	var c litCheck
	parts := []*syntax.Regexp{t}
	if t.Op == syntax.OpConcat {
		parts = t.Sub
	}
	for _, s := range parts {
		if set := anyOf(s); set != nil && len(c.need) < maxNeedSets {
			c.need = append(c.need, set)
		}
	}
	if lit, ok := plainLiteral(parts[0]); ok {
		rest := true
		for _, s := range parts[1:] {
			rest = rest && matchesEmpty(s)
		}
		if rest {
			c.sure = lit
		}
	}
	return c
}

// decide returns the answer when the literals give it: known is false
// when the expression must run.
func (c *litCheck) decide(line []byte) (match, known bool) {
	for _, set := range c.need {
		if !containsAny(line, set) {
			return false, true
		}
	}
	if c.sure != nil {
		return bytes.Contains(line, c.sure), true
	}
	return false, false
}

func containsAny(line []byte, set [][]byte) bool {
	for _, s := range set {
		if bytes.Contains(line, s) {
			return true
		}
	}
	return false
}

// anyOf returns strings of which every match of t contains one, nil when
// none is known (or one would be shorter than minNeedLen).
func anyOf(t *syntax.Regexp) [][]byte {
	switch t.Op {
	case syntax.OpLiteral:
		if lit, ok := plainLiteral(t); ok && len(lit) >= minNeedLen {
			return [][]byte{lit}
		}
	case syntax.OpCapture, syntax.OpPlus:
		return anyOf(t.Sub[0])
	case syntax.OpRepeat:
		if t.Min >= 1 {
			return anyOf(t.Sub[0])
		}
	case syntax.OpConcat:
		// The part whose shortest string is longest: the rarest, likely.
		var best [][]byte
		for _, s := range t.Sub {
			if set := anyOf(s); set != nil && (best == nil || shortest(set) > shortest(best)) {
				best = set
			}
		}
		return best
	case syntax.OpAlternate:
		var all [][]byte
		for _, s := range t.Sub {
			set := anyOf(s)
			if set == nil || len(all)+len(set) > maxNeedAlts {
				return nil
			}
			all = append(all, set...)
		}
		return all
	}
	return nil
}

func shortest(set [][]byte) int {
	n := len(set[0])
	for _, s := range set[1:] {
		n = min(n, len(s))
	}
	return n
}

// plainLiteral returns t's bytes when t is a literal that matches only
// itself, byte for byte: ASCII, case-sensitive.
func plainLiteral(t *syntax.Regexp) ([]byte, bool) {
	if t.Op != syntax.OpLiteral || t.Flags&syntax.FoldCase != 0 || len(t.Rune) == 0 {
		return nil, false
	}
	b := make([]byte, len(t.Rune))
	for i, r := range t.Rune {
		if r >= 0x80 {
			return nil, false
		}
		b[i] = byte(r)
	}
	return b, true
}

// matchesEmpty reports whether t matches the empty string wherever it is
// (an assertion such as \b or $ depends on where: false).
func matchesEmpty(t *syntax.Regexp) bool {
	switch t.Op {
	case syntax.OpEmptyMatch, syntax.OpStar, syntax.OpQuest:
		return true
	case syntax.OpCapture, syntax.OpPlus:
		return matchesEmpty(t.Sub[0])
	case syntax.OpRepeat:
		return t.Min == 0 || matchesEmpty(t.Sub[0])
	case syntax.OpConcat:
		for _, s := range t.Sub {
			if !matchesEmpty(s) {
				return false
			}
		}
		return true
	case syntax.OpAlternate:
		for _, s := range t.Sub {
			if matchesEmpty(s) {
				return true
			}
		}
	}
	return false
}
