package diagnosis

import (
	"regexp/syntax"
	"unicode/utf8"
)

// byteSet is a set of bytes.
type byteSet [4]uint64

func (s *byteSet) add(b byte)      { s[b>>6] |= 1 << (b & 63) }
func (s *byteSet) has(b byte) bool { return s[b>>6]&(1<<(b&63)) != 0 }
func (s *byteSet) addRange(lo, hi int) {
	for b := lo; b <= hi; b++ {
		s.add(byte(b))
	}
}

// mayEnd reports whether line ends with a byte of s (true for a nil s: no
// constraint).
func (s *byteSet) mayEnd(line []byte) bool {
	return s == nil || len(line) > 0 && s.has(line[len(line)-1])
}

// endBytes is the set of bytes a line may end with when it matches an
// expression anchored at the end of the text (t's every alternative ends
// in $): nil when t is not so anchored or when a match may be empty (then
// the line's last byte is not the match's). gpudirect's mixed pattern, for
// instance, must end in a digit, ")", "d" (of /Shared) or a space, and the
// healthy "[receive] via NET/IB/0/GDRDMA" lines that carry its literal end
// in "A": the matcher skips the expression for them (cpattern.reMatch).
func endBytes(t *syntax.Regexp) *byteSet {
	var s byteSet
	if !anchoredEnd(t, &s) || s == (byteSet{^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0)}) {
		return nil
	}
	return &s
}

// anchoredEnd adds to s the last bytes of t's matches and reports whether
// every match of t ends at the end of the text with a byte of its own.
func anchoredEnd(t *syntax.Regexp, s *byteSet) bool {
	switch t.Op {
	case syntax.OpCapture:
		return anchoredEnd(t.Sub[0], s)
	case syntax.OpAlternate:
		for _, a := range t.Sub {
			if !anchoredEnd(a, s) {
				return false
			}
		}
		return true
	case syntax.OpConcat:
		n := len(t.Sub)
		if n < 2 || t.Sub[n-1].Op != syntax.OpEndText {
			return false
		}
		return lastBytes(t.Sub[:n-1], s)
	}
	return false
}

// lastBytes adds to s the bytes a match of the sequence subs may end
// with; false when the sequence may match the empty string (or a part's
// last bytes are not known).
func lastBytes(subs []*syntax.Regexp, s *byteSet) bool {
	for i := len(subs) - 1; i >= 0; i-- {
		nullable, ok := nodeLast(subs[i], s)
		if !ok {
			return false
		}
		if !nullable {
			return true
		}
	}
	return false
}

// nodeLast adds to s the bytes a non-empty match of t may end with, and
// reports whether t may also match the empty string; ok is false when the
// bytes are not known (the caller gives up).
func nodeLast(t *syntax.Regexp, s *byteSet) (nullable, ok bool) {
	switch t.Op {
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText,
		syntax.OpEndText, syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return true, true
	case syntax.OpLiteral:
		if len(t.Rune) == 0 {
			return true, true
		}
		r := t.Rune[len(t.Rune)-1]
		if r >= utf8.RuneSelf {
			s.addRange(0x80, 0xff) // a continuation byte, or an invalid byte read as U+FFFD
			return false, true
		}
		s.add(byte(r))
		if t.Flags&syntax.FoldCase != 0 {
			switch {
			case 'a' <= r && r <= 'z':
				s.add(byte(r - 'a' + 'A'))
			case 'A' <= r && r <= 'Z':
				s.add(byte(r - 'A' + 'a'))
			}
			if r == 'k' || r == 'K' || r == 's' || r == 'S' {
				s.addRange(0x80, 0xff) // the Kelvin sign and the long s fold to them
			}
		}
		return false, true
	case syntax.OpCharClass:
		for i := 0; i+1 < len(t.Rune); i += 2 {
			lo, hi := t.Rune[i], t.Rune[i+1]
			if lo < utf8.RuneSelf {
				s.addRange(int(lo), int(min(hi, utf8.RuneSelf-1)))
			}
			if hi >= utf8.RuneSelf {
				s.addRange(0x80, 0xff)
			}
		}
		return false, true
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		s.addRange(0, 0xff)
		return false, true
	case syntax.OpCapture:
		return nodeLast(t.Sub[0], s)
	case syntax.OpStar, syntax.OpQuest:
		_, ok := nodeLast(t.Sub[0], s)
		return true, ok
	case syntax.OpPlus:
		return nodeLast(t.Sub[0], s)
	case syntax.OpRepeat:
		if t.Max == 0 {
			return true, true
		}
		nullable, ok := nodeLast(t.Sub[0], s)
		return nullable || t.Min == 0, ok
	case syntax.OpConcat:
		// Its last non-nullable part and the nullable ones after it.
		for i := len(t.Sub) - 1; i >= 0; i-- {
			nullable, ok := nodeLast(t.Sub[i], s)
			if !ok {
				return false, false
			}
			if !nullable {
				return false, true
			}
		}
		return true, true
	case syntax.OpAlternate:
		any := false
		for _, a := range t.Sub {
			nullable, ok := nodeLast(a, s)
			if !ok {
				return false, false
			}
			any = any || nullable
		}
		return any, true
	}
	return false, false
}
