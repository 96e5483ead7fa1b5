package diagnosis

import (
	"regexp"
	"regexp/syntax"
	"strconv"
	"strings"
	"unicode/utf8"
)

// exprString writes a parsed expression back as an expression regexp
// accepts, matching the same strings (captures are not kept: the matcher
// only asks whether and where a line matches). syntax.Regexp's own String
// does the same but works out the shortest flags for every character
// class by case-folding each of its ranges rune by rune: most of what
// compiling the whole shipped catalog cost, paid on CMD's first line of
// output and by every explain. Character classes are written as their
// ranges (the parser has already folded them), literals with (?i:) when
// folded, every operand in a non-capturing group.
func exprString(re *syntax.Regexp) string {
	var b strings.Builder
	writeExpr(&b, re)
	return b.String()
}

func writeExpr(b *strings.Builder, re *syntax.Regexp) {
	switch re.Op {
	case syntax.OpNoMatch:
		b.WriteString(`[^\x00-\x{10FFFF}]`)
	case syntax.OpEmptyMatch:
		b.WriteString(`(?:)`)
	case syntax.OpLiteral:
		fold := re.Flags&syntax.FoldCase != 0
		if fold {
			b.WriteString(`(?i:`)
		}
		for _, r := range re.Rune {
			if !utf8.ValidRune(r) {
				// \x{d800} matches nothing; string(r) would be U+FFFD.
				writeRune(b, r)
				continue
			}
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
		if fold {
			b.WriteString(`)`)
		}
	case syntax.OpCharClass:
		if len(re.Rune) == 0 {
			b.WriteString(`[^\x00-\x{10FFFF}]`)
			return
		}
		b.WriteString(`[`)
		for i := 0; i+1 < len(re.Rune); i += 2 {
			writeRune(b, re.Rune[i])
			if re.Rune[i+1] != re.Rune[i] {
				b.WriteString(`-`)
				writeRune(b, re.Rune[i+1])
			}
		}
		b.WriteString(`]`)
	case syntax.OpAnyCharNotNL:
		b.WriteString(`(?-s:.)`)
	case syntax.OpAnyChar:
		b.WriteString(`(?s:.)`)
	case syntax.OpBeginLine:
		b.WriteString(`(?m:^)`)
	case syntax.OpEndLine:
		b.WriteString(`(?m:$)`)
	case syntax.OpBeginText:
		b.WriteString(`\A`)
	case syntax.OpEndText:
		b.WriteString(`\z`)
	case syntax.OpWordBoundary:
		b.WriteString(`\b`)
	case syntax.OpNoWordBoundary:
		b.WriteString(`\B`)
	case syntax.OpCapture:
		writeGroup(b, re.Sub[0])
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
		writeGroup(b, re.Sub[0])
		switch re.Op {
		case syntax.OpStar:
			b.WriteString(`*`)
		case syntax.OpPlus:
			b.WriteString(`+`)
		case syntax.OpQuest:
			b.WriteString(`?`)
		default:
			b.WriteString(`{` + strconv.Itoa(re.Min))
			if re.Max != re.Min {
				b.WriteString(`,`)
				if re.Max >= 0 {
					b.WriteString(strconv.Itoa(re.Max))
				}
			}
			b.WriteString(`}`)
		}
		if re.Flags&syntax.NonGreedy != 0 {
			b.WriteString(`?`)
		}
	case syntax.OpConcat:
		for _, s := range re.Sub {
			writeGroup(b, s)
		}
	case syntax.OpAlternate:
		b.WriteString(`(?:`)
		for i, s := range re.Sub {
			if i > 0 {
				b.WriteString(`|`)
			}
			writeExpr(b, s)
		}
		b.WriteString(`)`)
	default:
		// Not produced by syntax.Parse; the library's own writer.
		b.WriteString(`(?:` + re.String() + `)`)
	}
}

// writeGroup writes re as one operand.
func writeGroup(b *strings.Builder, re *syntax.Regexp) {
	b.WriteString(`(?:`)
	writeExpr(b, re)
	b.WriteString(`)`)
}

func writeRune(b *strings.Builder, r rune) {
	b.WriteString(`\x{` + strconv.FormatInt(int64(r), 16) + `}`)
}
