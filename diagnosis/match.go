package diagnosis

import (
	"bytes"
	"regexp"
	"regexp/syntax"
)

// Go's regexp finds an unanchored match by retrying the expression at
// every byte offset unless the expression starts with a literal, which it
// then skips to with a substring search. Many catalog patterns start
// otherwise though each of their branches has a literal: an alternation
// of phrases ("NCCL error in:|DistBackendError|...", ib-transport's
// flush, gpudirect's loc-prot), a group of alternatives before a common
// tail ("(?:/dev/shm|shared memory|nccl-shm).*No space left"), or a word
// boundary before a literal ("\bNCCL WARN\b"). The matcher runs such a
// pattern as branches that each start with a literal: the top-level
// alternatives, a leading group distributed over its tail, and a leading
// \b checked by hand at the literal's position. The answer (does the
// line match) is the same (TestSplitAlternativesSameAnswer) at a fraction
// of the cost (TestPatternCost).

// branch is one way a pattern can match: re, which must match at a
// position where a word boundary holds when bound is set.
type branch struct {
	re    *regexp.Regexp
	pre   []byte   // re's literal prefix (literalPrefix)
	end   *byteSet // the bytes a line re matches may end with (endBytes)
	lits  litCheck // what re's literals decide (lits.go)
	bound bool
}

// guard is a negative pattern that is not a plain literal, with its
// literal prefix.
type guard struct {
	re   *regexp.Regexp
	pre  []byte
	lits litCheck
}

// literalPrefix is the literal every match of re starts with
// (regexp.LiteralPrefix), nil when there is none. A line that does not
// contain it cannot match, and bytes.Contains says so in a few
// nanoseconds where a call of the regular expression costs a hundred or
// more (its machine is taken from a pool and reset before it looks for
// the same prefix): most candidate lines fail most of their candidates'
// branches and negative patterns this way (docs/performance.md, fifth
// pass).
func literalPrefix(re *regexp.Regexp) []byte {
	if p, _ := re.LiteralPrefix(); p != "" {
		return []byte(p)
	}
	return nil
}

func (g guard) match(line []byte, t *tailMemo) bool {
	if g.pre != nil && !bytes.Contains(line, g.pre) {
		return false
	}
	if ok, known := g.lits.decide(line); known {
		return ok
	}
	return t.match(g.re, g.pre, line)
}

// maxBranches bounds how far a pattern is split.
const maxBranches = 32

// splitBranches returns expr (compiled: re) as branches with literal
// starts, or nil when splitting does not help (expr already starts with a
// literal, or a branch would not).
func splitBranches(expr string, re *regexp.Regexp) ([]branch, error) {
	if p, _ := re.LiteralPrefix(); p != "" {
		return nil, nil
	}
	t, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return nil, err
	}
	subs := distribute(t)
	if len(subs) > maxBranches {
		return nil, nil
	}
	var bs []branch
	gain := false
	for _, s := range subs {
		b, err := compileBranch(s)
		if err != nil {
			return nil, err
		}
		if p, _ := b.re.LiteralPrefix(); p != "" {
			gain = true
		}
		bs = append(bs, b)
	}
	if !gain {
		return nil, nil
	}
	return bs, nil
}

// compileBranch compiles s, dropping a leading \b that precedes a word
// byte literal (checked by branch.match instead).
func compileBranch(s *syntax.Regexp) (branch, error) {
	if s.Op == syntax.OpConcat && len(s.Sub) > 1 && s.Sub[0].Op == syntax.OpWordBoundary {
		rest := &syntax.Regexp{Op: syntax.OpConcat, Flags: s.Flags, Sub: s.Sub[1:]}
		re, err := regexp.Compile(exprString(rest))
		if err != nil {
			return branch{}, err
		}
		if p, _ := re.LiteralPrefix(); p != "" && isWordByte(p[0]) {
			// Its literal's presence is not enough: the boundary must hold.
			lits := litCheckOf(rest)
			lits.sure = nil
			return branch{re: re, pre: literalPrefix(re), end: endBytes(rest), lits: lits, bound: true}, nil
		}
	}
	re, err := regexp.Compile(exprString(s))
	return branch{re: re, pre: literalPrefix(re), end: endBytes(s), lits: litCheckOf(s)}, err
}

// distribute returns the alternatives of t: the top-level ones, and for
// one that starts with a group of alternatives, that group's alternatives
// each followed by the rest.
func distribute(t *syntax.Regexp) []*syntax.Regexp {
	for t.Op == syntax.OpCapture {
		t = t.Sub[0]
	}
	switch t.Op {
	case syntax.OpAlternate:
		var out []*syntax.Regexp
		for _, s := range t.Sub {
			out = append(out, distribute(s)...)
		}
		return out
	case syntax.OpConcat:
		head := t.Sub[0]
		for head.Op == syntax.OpCapture {
			head = head.Sub[0]
		}
		heads := leadChoices(head)
		if heads == nil {
			return []*syntax.Regexp{t}
		}
		var out []*syntax.Regexp
		for _, h := range heads {
			sub := append([]*syntax.Regexp{h}, t.Sub[1:]...)
			out = append(out, &syntax.Regexp{Op: syntax.OpConcat, Flags: t.Flags, Sub: sub})
		}
		return out
	}
	return []*syntax.Regexp{t}
}

// leadChoices returns what a concatenation's first element can be, one
// literal or expression each: a group's alternatives, the runes of a small
// character class ("[0-9]"), the two cases of a case-folded letter
// ("[Pp]"); nil when it is none of these.
func leadChoices(h *syntax.Regexp) []*syntax.Regexp {
	lit := func(r rune) *syntax.Regexp { return &syntax.Regexp{Op: syntax.OpLiteral, Rune: []rune{r}} }
	switch {
	case h.Op == syntax.OpAlternate:
		return distribute(h)
	case h.Op == syntax.OpCharClass:
		var out []*syntax.Regexp
		for i := 0; i+1 < len(h.Rune); i += 2 {
			for r := h.Rune[i]; r <= h.Rune[i+1]; r++ {
				if len(out) == 10 {
					return nil
				}
				out = append(out, lit(r))
			}
		}
		return out
	case h.Op == syntax.OpLiteral && h.Flags&syntax.FoldCase != 0 && len(h.Rune) >= 1:
		r := h.Rune[0]
		lo, up := unicodeLower(r), unicodeUpper(r)
		if lo == up {
			return nil
		}
		var out []*syntax.Regexp
		for _, c := range []rune{up, lo} {
			x := &syntax.Regexp{Op: syntax.OpConcat, Sub: []*syntax.Regexp{lit(c)}}
			if len(h.Rune) > 1 {
				x.Sub = append(x.Sub, &syntax.Regexp{Op: syntax.OpLiteral, Flags: h.Flags, Rune: h.Rune[1:]})
			}
			out = append(out, x)
		}
		return out
	}
	return nil
}

func unicodeLower(r rune) rune {
	if r >= 'A' && r <= 'Z' {
		return r + 'a' - 'A'
	}
	return r
}

func unicodeUpper(r rune) rune {
	if r >= 'a' && r <= 'z' {
		return r - ('a' - 'A')
	}
	return r
}

// reMatch reports whether line matches p's expression (not its negative
// patterns), with the answers remembered in t (nil: not).
func (p *cpattern) reMatch(line []byte, t *tailMemo) bool {
	p.mustReady()
	if p.branches == nil {
		// The whole expression is one branch, without a word boundary.
		return branch{re: p.re, pre: p.rePre, end: p.reEnd, lits: p.reLits}.match(line, t)
	}
	for _, b := range p.branches {
		if b.match(line, t) {
			return true
		}
	}
	return false
}

func (b branch) match(line []byte, t *tailMemo) bool {
	if b.pre != nil && !bytes.Contains(line, b.pre) || !b.end.mayEnd(line) {
		return false
	}
	if ok, known := b.lits.decide(line); known {
		return ok
	}
	if !b.bound {
		return t.match(b.re, b.pre, line)
	}
	// The branch starts with a word byte (its literal): a word boundary
	// holds at a start s when the byte before s is not a word byte.
	for off := 0; off < len(line); {
		loc := b.re.FindIndex(line[off:])
		if loc == nil {
			return false
		}
		s := off + loc[0]
		if s == 0 || !isWordByte(line[s-1]) {
			return true
		}
		off = s + 1
	}
	return false
}
