package diagnosis

import (
	"math/bits"
	"regexp/syntax"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The prefilter's literals are derived from each pattern's expression:
// a set of strings of which every match contains one (a pattern may
// still match a line that holds one and not match it; the expression
// decides). Nothing is written by hand, so a literal can never be wrong.
//
// A sub-expression that can match only a few short strings (a literal, a
// small class, an alternation of those, an optional part) is expanded to
// them; the strings of consecutive such parts of a concatenation are
// joined; of the parts of a concatenation the one whose strings a healthy
// log holds least (litCost) is the pattern's.
//
// A literal shorter than gramLen+1 bytes leaves the gram filter nothing to
// look for: a catalog with one passes every line to the automaton
// (TestShippedLiteralsFilter keeps the shipped one clear of them).
//
// maxLits bounds the strings of one set: a class or an alternation that
// would expand to more is not used.
const maxLits = 32

// literalsOf returns the literals of t, an expression as syntax.Parse
// gave it (Perl flags, as regexp.Compile parses), or false when no set of
// non-empty strings covers every match (t can match the empty string, or
// any line).
func literalsOf(t *syntax.Regexp) ([]string, bool) {
	set, ok := required(t.Simplify())
	if !ok || len(set) == 0 {
		return nil, false
	}
	slices.Sort(set)
	return slices.Compact(set), true
}

func shortestLit(set []string) int {
	n := -1
	for _, s := range set {
		if n < 0 || len(s) < n {
			n = len(s)
		}
	}
	return n
}

// better reports whether set a filters better than set b: fewer of the
// gram filter's reference lines (healthy INFO lines, gram.go) pass it,
// then its shortest string is longer, then it has fewer strings.
func better(a, b []string) bool {
	if b == nil {
		return a != nil
	}
	if a == nil {
		return false
	}
	ca, cb := setCost(a), setCost(b)
	if ca != cb {
		return ca < cb
	}
	la, lb := shortestLit(a), shortestLit(b)
	return la > lb || la == lb && len(a) < len(b)
}

// setCost is how many reference lines the gram filter would pass for the
// strings of set: for each, the fewest any two consecutive 4-byte windows
// of it hold (the pair gramChooser would pick); a string too short for a
// pair passes every line.
func setCost(set []string) int {
	in := gramRefLines.Get()
	var lines uint64
	for _, s := range set {
		if len(s) < gramLen+1 {
			return 65
		}
		best := ^uint64(0)
		for i := 0; i+gramLen+1 <= len(s); i++ {
			l := in[s[i:i+gramLen]] | in[s[i+1:i+1+gramLen]]
			if bits.OnesCount64(l) < bits.OnesCount64(best) {
				best = l
			}
		}
		lines |= best
	}
	return bits.OnesCount64(lines)
}

// required is a set of which every match of t contains one string, or
// false when there is none (t may match the empty string, or anything).
func required(t *syntax.Regexp) ([]string, bool) {
	if set, ok := exact(t); ok {
		if shortestLit(set) > 0 {
			return set, true
		}
		return nil, false
	}
	switch t.Op {
	case syntax.OpLiteral:
		// Not exact: it holds U+FFFD, which matches any invalid byte. Its
		// longest part without one is in every match.
		var best []rune
		for _, part := range strings.Split(string(t.Rune), string(utf8.RuneError)) {
			if r := []rune(part); len(r) > len(best) {
				best = r
			}
		}
		if len(best) > 0 {
			return required(&syntax.Regexp{Op: syntax.OpLiteral, Flags: t.Flags, Rune: best})
		}
	case syntax.OpCapture, syntax.OpPlus:
		return required(t.Sub[0])
	case syntax.OpRepeat:
		if t.Min >= 1 {
			return required(t.Sub[0])
		}
	case syntax.OpAlternate:
		return union(t.Sub, required)
	case syntax.OpConcat:
		var best []string
		var run []string // the strings of the current run of exact parts
		inRun := false
		flush := func() {
			if inRun && shortestLit(run) > 0 && better(run, best) {
				best = run
			}
			run, inRun = nil, false
		}
		for _, s := range t.Sub {
			if set, ok := exact(s); ok {
				if !inRun {
					run, inRun = set, true
					continue
				}
				if joined, ok := cross(run, set); ok {
					run = joined
					continue
				}
				flush()
				run, inRun = set, true
				continue
			}
			flush()
			if set, ok := required(s); ok && better(set, best) {
				best = set
			}
		}
		flush()
		return best, best != nil
	}
	return nil, false
}

// exact returns every string t can match, when they are at most maxLits
// (t is a literal, a small class, or built of those).
func exact(t *syntax.Regexp) ([]string, bool) {
	switch t.Op {
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText,
		syntax.OpEndText, syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return []string{""}, true
	case syntax.OpLiteral:
		if slices.Contains(t.Rune, utf8.RuneError) {
			return nil, false // it also matches any invalid byte of a line
		}
		if t.Flags&syntax.FoldCase == 0 {
			return []string{string(t.Rune)}, true
		}
		all := []string{""} // (?i) or [Ee]: each rune in every case it folds to
		for _, r := range t.Rune {
			choice := []string{string(r)}
			for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
				choice = append(choice, string(f)) // k: K and the Kelvin sign too
			}
			var ok bool
			if all, ok = cross(all, choice); !ok {
				return nil, false
			}
		}
		return all, true
	case syntax.OpCharClass:
		if matchesRune(t, utf8.RuneError) {
			return nil, false // it also matches any invalid byte of a line
		}
		var set []string
		for i := 0; i+1 < len(t.Rune); i += 2 {
			if int(t.Rune[i+1]-t.Rune[i])+1+len(set) > maxLits {
				return nil, false
			}
			for r := t.Rune[i]; r <= t.Rune[i+1]; r++ {
				set = append(set, string(r))
			}
		}
		return set, len(set) > 0
	case syntax.OpCapture:
		return exact(t.Sub[0])
	case syntax.OpQuest:
		set, ok := exact(t.Sub[0])
		if !ok || len(set) >= maxLits {
			return nil, false
		}
		return append(set, ""), true
	case syntax.OpAlternate:
		return union(t.Sub, exact)
	case syntax.OpConcat:
		all := []string{""}
		for _, s := range t.Sub {
			set, ok := exact(s)
			if !ok {
				return nil, false
			}
			if all, ok = cross(all, set); !ok {
				return nil, false
			}
		}
		return all, true
	}
	return nil, false
}

// union is every string of of(s) for each s of subs, when each has
// them and they are at most maxLits.
func union(subs []*syntax.Regexp, of func(*syntax.Regexp) ([]string, bool)) ([]string, bool) {
	var all []string
	for _, s := range subs {
		set, ok := of(s)
		if !ok || len(all)+len(set) > maxLits {
			return nil, false
		}
		all = append(all, set...)
	}
	return all, true
}

// matchesRune reports whether class t holds r.
func matchesRune(t *syntax.Regexp, r rune) bool {
	for i := 0; i+1 < len(t.Rune); i += 2 {
		if t.Rune[i] <= r && r <= t.Rune[i+1] {
			return true
		}
	}
	return false
}

// cross is every string of a followed by every string of b, when they
// are at most maxLits.
func cross(a, b []string) ([]string, bool) {
	if len(a)*len(b) > maxLits {
		return nil, false
	}
	out := make([]string, 0, len(a)*len(b))
	for _, x := range a {
		for _, y := range b {
			out = append(out, x+y)
		}
	}
	return out, true
}
