package diagnosis

import (
	"regexp"
	"regexp/syntax"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// setString lists the printable bytes of s, and "+hi" when it holds the
// bytes from 0x80.
func setString(s *byteSet) string {
	if s == nil {
		return "<any>"
	}
	var b strings.Builder
	for c := 0; c < 0x80; c++ {
		if s.has(byte(c)) {
			switch c {
			case '\t':
				b.WriteString(`\t`)
			case '\n':
				b.WriteString(`\n`)
			case '\f':
				b.WriteString(`\f`)
			case '\r':
				b.WriteString(`\r`)
			default:
				b.WriteByte(byte(c))
			}
		}
	}
	if s.has(0x80) {
		b.WriteString("+hi")
	}
	return b.String()
}

func TestEndBytes(t *testing.T) {
	for _, c := range []struct{ expr, want string }{
		{`abc$`, "c"},
		{`abc`, "<any>"},               // not anchored
		{`(?m)abc$`, "<any>"},          // $ of a line, not of the text
		{`a*$`, "<any>"},               // may match empty: the line's last byte is not the match's
		{`x\s*$`, `\t\n\f\r x`},        // \s* then x
		{`(?:ab|cd)$`, "bd"},           // alternatives in a group
		{`ab$|cd$`, "bd"},              // top-level alternatives, all anchored
		{`ab$|cd`, "<any>"},            // one is not
		{`(?i)ab$`, "Bb"},              // case folded
		{`(?i)ks$`, "Ss+hi"},           // ſ (U+017F) folds to s
		{`[0-9a-c]$`, "0123456789abc"}, // a class
		{`é$`, "+hi"},                  // a multi-byte rune ends in a continuation byte
		{`a.$`, "<any>"},               // any byte
		{`\d+(?:\(\d+\))?(?:/Shared)?\s*$`, `\t\n\f\r )0123456789d`},
		{`x{0}$`, "<any>"},
		{`ab{2,3}$`, "b"},
		{`a(?:b{0,2})$`, "ab"},
		{`(a)$`, "a"},
		{`\bend\b$`, "d"},
	} {
		tr, err := syntax.Parse(c.expr, syntax.Perl)
		require.NoError(t, err, c.expr)
		got := setString(endBytes(tr))
		if c.want == "<any>" {
			assert.Equal(t, "<any>", got, c.expr)
			continue
		}
		assert.Equal(t, c.want, got, c.expr)
	}
	tr, err := syntax.Parse(`[^a]$`, syntax.Perl)
	require.NoError(t, err)
	s := endBytes(tr)
	require.NotNil(t, s)
	assert.False(t, s.has('a'))
	assert.True(t, s.has('b') && s.has(0) && s.has(0xff))
}

// TestEndBytesSound: the end check never refuses a line that the
// expression matches, for every pattern and branch of the shipped catalog
// that has one, over every test line and the same with a trailing space.
func TestEndBytesSound(t *testing.T) {
	c := DefaultCatalog()
	lines := allTestLines(t)
	checked := 0
	for _, p := range c.pats {
		p.mustReady()
		type one struct {
			re  *regexp.Regexp
			end *byteSet
		}
		all := []one{{p.re, p.reEnd}}
		for _, b := range p.branches {
			all = append(all, one{b.re, b.end})
		}
		for _, o := range all {
			if o.end == nil {
				continue
			}
			checked++
			for _, l := range lines {
				for _, v := range []string{l, l + " "} {
					if o.re.MatchString(v) {
						require.True(t, o.end.mayEnd([]byte(v)), "%s: %q matches %q", p.Name, o.re, v)
					}
				}
			}
		}
	}
	require.NotZero(t, checked, "no pattern of the catalog has an end check")
}

// FuzzEndBytes: for any expression and line, a match implies the end
// check passes.
func FuzzEndBytes(f *testing.F) {
	f.Add(`\[receive\] via NET/(?:IB|OFI)/\d+(?:\(\d+\))?(?:/Shared)?\s*$`, "a [receive] via NET/IB/0(1)/Shared ")
	f.Add(`(?i)ks$`, "\u017f")
	f.Add(`(?:a|b*)$`, "xb")
	f.Add(`[^\x00-\x{10FFFF}]$`, "\xff")
	f.Fuzz(func(t *testing.T, expr, line string) {
		tr, err := syntax.Parse(expr, syntax.Perl)
		if err != nil {
			return
		}
		re, err := regexp.Compile(expr)
		if err != nil {
			return
		}
		if re.MatchString(line) && !endBytes(tr).mayEnd([]byte(line)) {
			t.Fatalf("%q matches %q but the end check refuses it", expr, line)
		}
	})
}
