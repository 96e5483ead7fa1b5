package advice

import (
	"bytes"
	"strings"
)

// Alternatives splits a fix that offers several ways ("do A; or do B;
// or do C") into one alternative each, so that each can start a line.
func Alternatives(fix string) []string {
	alts := strings.Split(fix, "; or ")
	for i := 1; i < len(alts); i++ {
		alts[i] = "or " + alts[i]
	}
	return alts
}

// Layout renders a fix with each alternative on a line of its own: the
// first after lead, the others after indent.
func Layout(fix, lead, indent string) string {
	alts := Alternatives(fix)
	for i := range alts {
		if i == 0 {
			alts[i] = lead + alts[i]
		} else {
			alts[i] = indent + alts[i]
		}
	}
	return strings.Join(alts, "\n")
}

// Message lays text out as ncclrun's messages on stderr: every line
// prefixed with "ncclrun: " and indent, in one slice for one Write, so
// that it does not interleave with CMD's relayed stderr.
func Message(indent, text string) []byte {
	var b bytes.Buffer
	for _, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		b.WriteString("ncclrun: " + indent + l + "\n")
	}
	return b.Bytes()
}

// ShellWord is s as one word of a POSIX sh command line in a fix text: as
// it is when it holds only characters the shell takes literally, else in
// single quotes.
func ShellWord(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./+:@%,=-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
