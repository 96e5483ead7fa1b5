package diagnosis

import (
	"bytes"
	"regexp"
)

// guard is a negative pattern that is not a plain literal, with its
// literal prefix.
type guard struct {
	re  *regexp.Regexp
	pre []byte
}

// literalPrefix is the literal every match of re starts with
// (regexp.LiteralPrefix), nil when there is none. A line that does not
// contain it cannot match, and bytes.Contains says so in a few
// nanoseconds where a call of the regular expression costs a hundred or
// more: most candidate lines fail most of their candidates' negative
// patterns this way.
func literalPrefix(re *regexp.Regexp) []byte {
	if p, _ := re.LiteralPrefix(); p != "" {
		return []byte(p)
	}
	return nil
}

func (g guard) match(line []byte) bool {
	return (g.pre == nil || bytes.Contains(line, g.pre)) && g.re.Match(line)
}

// reMatch reports whether line matches p's expression (not its negative
// patterns).
func (p *cpattern) reMatch(line []byte) bool {
	p.mustReady()
	return (p.rePre == nil || bytes.Contains(line, p.rePre)) && p.re.Match(line)
}
