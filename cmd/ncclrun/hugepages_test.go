package main

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// thpOffHelperEnv makes the test binary turn transparent huge pages off
// for itself and exec its arguments after "--": a parent that started
// ncclrun with them off.
const thpOffHelperEnv = "NCCLRUN_THP_OFF_HELPER"

func init() {
	if os.Getenv(thpOffHelperEnv) == "" {
		return
	}
	argv := os.Args
	for len(argv) > 0 && argv[0] != "--" {
		argv = argv[1:]
	}
	if len(argv) < 2 {
		os.Exit(125)
	}
	if err := unix.Prctl(unix.PR_SET_THP_DISABLE, 1, 0, 0, 0); err != nil {
		os.Exit(125)
	}
	env := []string{}
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, thpOffHelperEnv+"=") {
			env = append(env, e)
		}
	}
	_ = syscall.Exec(argv[1], argv[1:], env)
	os.Exit(125)
}

// TestRunKeepsCMDsHugePages: ncclrun turns transparent huge pages off
// for itself (its RSS on a node whose THP setting is "always"), and CMD
// starts with the setting ncclrun was started with, on or off. The
// kernel shows it as THP_enabled in /proc/PID/status; sh's parent is
// ncclrun, unless --no-watch execs CMD in place.
func TestRunKeepsCMDsHugePages(t *testing.T) {
	if b, err := os.ReadFile("/proc/self/status"); err != nil || !strings.Contains(string(b), "THP_enabled:") {
		t.Skip("this kernel does not show THP_enabled in /proc/PID/status")
	}
	script := `sed -n 's/^THP_enabled:[[:space:]]*/cmd /p' /proc/self/status; sed -n 's/^THP_enabled:[[:space:]]*/parent /p' /proc/$PPID/status`
	off := []string{os.Args[0], "--"}
	for _, c := range []struct {
		name string
		pre  []string
		run  []string
		want string
	}{
		{"started with huge pages", nil, []string{"run"}, "cmd 1\nparent 0\n"},
		{"started without", off, []string{"run"}, "cmd 0\nparent 0\n"},
		// The parent is the test binary, which keeps huge pages on.
		{"exec in place", nil, []string{"run", "--no-watch"}, "cmd 1\nparent 1\n"},
		{"exec in place, started without", off, []string{"run", "--no-watch"}, "cmd 0\nparent 1\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var env []string
			if c.pre != nil {
				env = []string{thpOffHelperEnv + "=1"}
			}
			r := invocation{args: append(c.run, "--", "sh", "-c", script), pre: c.pre, env: env}.run(t)
			require.Equal(t, 0, r.code, r.stderr)
			assert.Equal(t, c.want, r.stdout)
		})
	}
}

// TestNoDefaultGODEBUGToKeep: the Makefile links the binary's default
// GODEBUG as disablethp=1, and a user's -X comes after the go command's
// own, which it computes from go.mod: where that is not empty, the
// Makefile would drop it, and must name both.
func TestNoDefaultGODEBUGToKeep(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.DefaultGODEBUG}}", ".").Output()
	require.NoError(t, err)
	assert.Empty(t, strings.TrimSpace(string(out)), "go.mod's default GODEBUG: merge it into the Makefile's GODEBUG_DEFAULT")
}
