package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOwnErrorsArePrintable: a name on ncclrun's own command line (a file,
// a flag) reaches its one-line error as printable text, so an escape
// sequence in it shows on the terminal instead of acting.
func TestOwnErrorsArePrintable(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want string
		code int
	}{
		{"explain missing file", []string{"ncclrun", "explain", dir + "/no\x1b]0;title\x07such"}, `no\x1b]0;title\x07such`, ExitUsage},
		{"lint missing file", []string{"ncclrun", "lint", dir + "/no\x1b[2Jsuch"}, `no\x1b[2Jsuch`, ExitUsage},
		{"unknown flag", []string{"ncclrun", "run", "--bad\x1b[2J", "--", "true"}, `bad\x1b[2J`, ExitUsage},
		{"unknown explain flag", []string{"ncclrun", "explain", "--bad\u009b2J"}, `bad\u009b2J`, ExitUsage},
		{"invalid UTF-8 file name", []string{"ncclrun", "explain", dir + "/no\xffsuch"}, "no\uFFFDsuch", ExitUsage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tc.args, strings.NewReader(""), &stdout, &stderr)
			require.Equal(t, tc.code, code, stderr.String())
			msg := stderr.String()
			assert.Contains(t, msg, tc.want)
			for _, line := range strings.SplitAfter(strings.TrimSuffix(msg, "\n"), "\n") {
				assert.True(t, strings.HasPrefix(line, "ncclrun: "), "line %q", line)
			}
			assert.NotContains(t, msg, "\x1b")
			assert.NotContains(t, msg, "\x07")
			assert.NotContains(t, msg, "\u009b")
			assert.NotContains(t, msg, "\xff")
		})
	}
}
