// Package printable makes text from a log or a manifest safe to quote in
// ncclrun's own messages: those reach a terminal, where an escape
// sequence planted in the input (a window title, a cleared screen, a
// moved cursor) must show, not act.
package printable

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// String is s as valid UTF-8 (U+FFFD for each run of invalid bytes) with each
// control character but the tab (C0, DEL, C1) written as a Go escape:
// `\x1b`, `\u009b`. Text without either is returned as it is.
func String(s string) string {
	if utf8.ValidString(s) && !strings.ContainsFunc(s, isControl) {
		return s
	}
	var out strings.Builder
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		switch {
		case !isControl(r):
			out.WriteRune(r)
		case r < 0x80:
			fmt.Fprintf(&out, `\x%02x`, r)
		default:
			fmt.Fprintf(&out, `\u%04x`, r)
		}
	}
	return out.String()
}

// isControl reports whether r is a control character other than the tab.
func isControl(r rune) bool { return r < 0x20 && r != '\t' || r >= 0x7f && r <= 0x9f }
