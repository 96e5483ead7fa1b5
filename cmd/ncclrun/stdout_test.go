package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ncclrun/ncclrun/internal/testutil"
	"github.com/stretchr/testify/require"
)

// Promise (docs/cli.md "Exit status"): a command whose own output cannot
// be written to stdout (a full device) says so in one line on stderr and
// exits 125, whatever the command; run's stdout is CMD's and stays CMD's.
func TestStdoutWriteFailureExits125(t *testing.T) {
	testutil.RequireTool(t, "sh")
	log := filepath.Join(t.TempDir(), "w.log")
	require.NoError(t, os.WriteFile(log, []byte("hello\n"), 0o644))
	_, err := os.Stat("/dev/full")
	haveFull := err == nil
	redirects := map[string]string{"full": ">/dev/full"}
	for _, args := range [][]string{
		{"version"}, {"--version"}, {"explain", log}, {"explain", "--json", log},
		{"env"}, {"doctor"}, {"--help"},
	} {
		for name, redir := range redirects {
			t.Run(strings.ReplaceAll(strings.Join(args, " "), log, "LOG")+" "+name, func(t *testing.T) {
				if name == "full" && !haveFull {
					t.Skip("no /dev/full")
				}
				r := invocation{pre: []string{"sh", "-c", `exec "$@" ` + redir, "sh"}, args: args}.run(t)
				require.Equal(t, ExitInternal, r.code, "stderr: %q", r.stderr)
				lines := r.errLines()
				require.NotEmpty(t, lines)
				last := lines[len(lines)-1]
				require.True(t, strings.HasPrefix(last, "ncclrun: "), r.stderr)
				require.Contains(t, last, "/dev/stdout")
				require.NotContains(t, r.stderr, "warning: write", "one line, not two")
			})
		}
	}
	t.Run("run with CMD's stdout closed", func(t *testing.T) {
		r := invocation{pre: []string{"sh", "-c", `exec "$@" >&-`, "sh"}, args: []string{"--quiet", "--", "true"}}.run(t)
		require.Equal(t, 0, r.code, "stderr: %q", r.stderr)
	})
	t.Run("stdout on /dev/null", func(t *testing.T) {
		r := invocation{pre: []string{"sh", "-c", `exec "$@" >/dev/null`, "sh"}, args: []string{"version"}}.run(t)
		require.Equal(t, 0, r.code, "stderr: %q", r.stderr)
		require.Empty(t, r.stderr)
	})
}
