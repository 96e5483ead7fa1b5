package main

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// goneAfter is a stdout whose reader goes away after n bytes, as `| head
// -c n` does: later writes fail with EPIPE, as os.Stdout's would.
type goneAfter struct {
	n   int
	got bytes.Buffer
}

func (g *goneAfter) Write(p []byte) (int, error) {
	if g.got.Len()+len(p) > g.n {
		k := max(0, g.n-g.got.Len())
		g.got.Write(p[:k])
		return k, &fs.PathError{Op: "write", Path: "/dev/stdout", Err: syscall.EPIPE}
	}
	return g.got.Write(p)
}

// Promise (docs/cli.md "Exit status"): a command other than run whose
// stdout's reader went away ends quietly with its own status, however much
// of its output was read.
func TestReaderGoneEndsQuietly(t *testing.T) {
	trap, seed := "../../examples/kubernetes/seed-trap.yaml", "../../diagnosis/testdata/corpus/memlock-seed.log"
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"--help"}, 0},
		{[]string{"explain", "--help"}, 0},
		{[]string{"version"}, 0},
		{[]string{"lint", trap}, exitLintFinding},
		{[]string{"lint", "../../examples/"}, exitLintFinding},
		{[]string{"lint", "--format", "sarif", trap}, exitLintFinding},
		{[]string{"explain", seed}, 0},
		{[]string{"explain", "--json", seed}, 0},
		{[]string{"doctor", "--root", "../../preflight/testdata/k8s-trap"}, ExitCheckFailed},
		{[]string{"doctor", "--json", "--root", "../../preflight/testdata/k8s-trap"}, ExitCheckFailed},
		{[]string{"env", "--root", "../../preflight/testdata/k8s-trap"}, 0},
		{[]string{"snapshot", "-o", "-", "--root", "../../preflight/testdata/k8s-trap"}, 0},
	} {
		for _, n := range []int{0, 1, 100} {
			t.Run(strings.Join(tc.args, " ")+" after "+strconv.Itoa(n), func(t *testing.T) {
				out := &goneAfter{n: n}
				var stderr bytes.Buffer
				code := run(append([]string{"ncclrun"}, tc.args...), strings.NewReader(""), out, &stderr)
				assert.Equal(t, tc.want, code)
				assert.Empty(t, stderr.String())
			})
		}
	}
}

// The same through a real pipe whose read end is closed before ncclrun
// writes: it gets EPIPE (it writes through a duplicate of its stdout, so
// the Go runtime does not kill it with SIGPIPE) and says nothing of it.
func TestClosedPipeEndsQuietly(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"--help"}, 0},
		{[]string{"version"}, 0},
		{[]string{"explain", "../../diagnosis/testdata/corpus/memlock-seed.log"}, 0},
		{[]string{"lint", "../../examples/kubernetes/seed-trap.yaml"}, exitLintFinding},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r, w, err := os.Pipe()
			require.NoError(t, err)
			require.NoError(t, r.Close())
			cmd := exec.Command(bin, tc.args...)
			cmd.Env = baseEnv(t)
			var stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = w, &stderr
			err = cmd.Run()
			require.NoError(t, w.Close())
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tc.want, code, "stderr %q", stderr.String())
			assert.Empty(t, stderr.String())
		})
	}
}

// The same for stderr: a command other than run whose stderr is a pipe
// with no reader exits with its own status (here a usage error's), not
// killed by SIGPIPE for its write of the message.
func TestClosedStderrKeepsStatus(t *testing.T) {
	r, w, err := os.Pipe()
	require.NoError(t, err)
	require.NoError(t, r.Close())
	cmd := exec.Command(bin, "version", "--bogus")
	cmd.Env = baseEnv(t)
	cmd.Stderr = w
	err = cmd.Run()
	require.NoError(t, w.Close())
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	ws := ee.Sys().(syscall.WaitStatus)
	require.False(t, ws.Signaled(), "killed by %v", ws.Signal())
	assert.Equal(t, ExitUsage, ws.ExitStatus())
}
