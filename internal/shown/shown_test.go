package shown

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestStartAndLine: Start and a Line fed in pieces of every size agree on
// what a terminal shows (a Line leaves out the '\r's that end the line),
// cut to Max.
func TestStartAndLine(t *testing.T) {
	for _, tc := range []struct{ name, line, want string }{
		{"no redraw", "abc", "abc"},
		{"redraws", " 1%|#\r 2%|##\rhost:1:2 NCCL WARN x", "\rhost:1:2 NCCL WARN x"},
		{"CRLF ending", "abc\r", "abc"},
		{"trailing redraws", "a\rbc\r\r", "\rbc"},
		{"cut to Max", "\r" + strings.Repeat("x", 40), "\r" + strings.Repeat("x", 31)},
		{"leading CR", "\rabc", "\rabc"},
		{"empty", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := []byte(tc.line)
			s := strings.TrimRight(string(b[Start(b):]), "\r")
			s = s[:min(len(s), 32)]
			assert.Equal(t, tc.want, s, "Start")
			for n := 1; n <= len(b); n++ {
				l := Line{Max: 32}
				for p := b; len(p) > 0; p = p[min(n, len(p)):] {
					l.Add(p[:min(n, len(p))])
				}
				assert.Equal(t, tc.want, string(l.Buf), "pieces of %d", n)
			}
		})
	}
}

// TestLineInPlace: Buf may be the storage of the piece it reads.
func TestLineInPlace(t *testing.T) {
	b := []byte("aaaa\rbbbb\rcc")
	l := Line{Max: 64}
	l.Reset(b)
	l.Add(b)
	assert.Equal(t, "\rcc", string(l.Buf))
}
