package main

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Promise (docs/contract.md): each command owns its flags. A flag a
// command does not own is a usage error; its NCCLRUN_* variable is
// ignored there.
func TestFlagNotOwnedIsUsageError(t *testing.T) {
	log := filepath.Join(t.TempDir(), "w.log")
	require.NoError(t, os.WriteFile(log, []byte("hello\n"), 0o644))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"explain", "--memlock", "bogus", log}, "--memlock is not a flag of explain (it is a flag of run, doctor and env); ncclrun explain --help lists its flags"},
		{[]string{"--memlock", "64KiB", "explain", log}, "--memlock is not a flag of explain"},
		{[]string{"doctor", "--report", "r.json"}, "--report is not a flag of doctor (it is a flag of run)"},
		{[]string{"run", "--probe", "1MiB", "--", "true"}, "--probe is not a flag of run (it is a flag of doctor)"},
		{[]string{"--probe", "1MiB", "--", "true"}, "--probe is not a flag of run"},
		{[]string{"version", "--quiet"}, "--quiet is not a flag of version"},
		{[]string{"demo", "--root", "/"}, "--root is not a flag of demo"},
		{[]string{"env", "--strict"}, "--strict is not a flag of env"},
		{[]string{"lint", "--json", log}, "--json is not a flag of lint (it is a flag of doctor and explain)"},
		{[]string{"doctor", "--format", "json"}, "--format is not a flag of doctor (it is a flag of env and lint)"},
		{[]string{"snapshot", "--user", "1000"}, "--user is not a flag of snapshot"},
		{[]string{"--stop-grace", "1m", "doctor"}, "--stop-grace is not a flag of doctor"},
		{[]string{"--no-such-flag", "--", "true"}, "--no-such-flag is not a flag of run; ncclrun run --help lists its flags"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			requireUsage(t, ncclrun(t, tc.args...), tc.want)
		})
	}
}

// The help of a command lists its own flags, none of run's.
func TestHelpListsOwnFlags(t *testing.T) {
	for _, tc := range []struct {
		command     string
		has, hasNot []string
	}{
		{"explain", []string{"--json"}, []string{"--kill-after", "--memlock", "--root"}},
		{"version", nil, []string{"--kill-after", "--json", "--root"}},
		{"demo", nil, []string{"--kill-after", "--root"}},
		{"doctor", []string{"--json", "--probe", "--root", "--user", "--drop-cap", "--memlock", "--min-memlock"}, []string{"--kill-after", "--report", "--strict"}},
		{"env", []string{"--format", "--nccl-debug", "--user"}, []string{"--kill-after", "--probe", "--json"}},
		{"run", []string{"--kill-after", "--stop-grace", "--hang-after", "--on-hang", "NCCLRUN_HANG_AFTER", "NCCLRUN_ON_HANG"}, []string{"--probe", "--json", "--format"}},
	} {
		t.Run(tc.command, func(t *testing.T) {
			r := ncclrun(t, tc.command, "--help")
			require.Equal(t, 0, r.code, r.stderr)
			for _, f := range tc.has {
				assert.Contains(t, r.stdout, f)
			}
			for _, f := range tc.hasNot {
				assert.NotContains(t, r.stdout, f)
			}
		})
	}
}

// Each flag's help line says its default once: a default written in the
// usage text and the one the CLI library appends read "(default 0: off)
// (default: 0s)".
func TestHelpSaysEachDefaultOnce(t *testing.T) {
	for _, command := range []string{"run", "doctor", "env", "explain", "lint", "snapshot"} {
		t.Run(command, func(t *testing.T) {
			r := ncclrun(t, command, "--help")
			require.Equal(t, 0, r.code, r.stderr)
			for _, l := range strings.Split(r.stdout, "\n") {
				assert.LessOrEqual(t, strings.Count(l, "(default"), 1, "%q", l)
			}
		})
	}
}

// An empty NCCLRUN_* variable is unset, for a flag with a default as for
// every other (an empty boolean, duration or list already was): a chart's
// `value: ""` does not make the default an error.
func TestEmptyVariableIsUnset(t *testing.T) {
	tree := "../../preflight/testdata/k8s-trap"
	for _, tc := range []struct {
		variable string
		args     []string
		code     int
	}{
		{"NCCLRUN_NCCL_DEBUG", []string{"env", "--root", tree}, 0},
		{"NCCLRUN_NCCL_DEBUG", []string{"--quiet", "--", "true"}, 0},
		{"NCCLRUN_NCCL_IB", []string{"env", "--root", tree}, 0},
		{"NCCLRUN_FORMAT", []string{"env", "--root", tree}, 0},
		{"NCCLRUN_LINT_FORMAT", []string{"lint", "../../examples/kubernetes/seed-trap.yaml"}, exitLintFinding},
		{"NCCLRUN_LINT_FAIL_ON", []string{"lint", "../../examples/kubernetes/seed-trap.yaml"}, exitLintFinding},
		{"NCCLRUN_ON_HANG", []string{"--quiet", "--", "true"}, 0},
		{"NCCLRUN_STRICT", []string{"--quiet", "--", "true"}, 0},
	} {
		t.Run(tc.variable+" "+tc.args[0], func(t *testing.T) {
			r := invocation{args: tc.args, env: []string{tc.variable + "="}}.run(t)
			assert.Equal(t, tc.code, r.code, "stderr %q", r.stderr)
			assert.Empty(t, r.stderr)
		})
	}
}

// A variable of a flag the command does not own is not read: the image's
// run settings do not break `docker run --entrypoint ncclrun IMAGE
// doctor`, nor lint; one of a flag it owns still is.
func TestVariableNotOwnedIsIgnored(t *testing.T) {
	runVars := []string{"NCCLRUN_KILL_AFTER=bogus", "NCCLRUN_STOP_GRACE=bogus", "NCCLRUN_STRICT=bogus",
		"NCCLRUN_REPORT=/nonexistent/r.json", "NCCLRUN_HANG_AFTER=bogus", "NCCLRUN_ON_HANG=bogus"}
	tree := fakeTree(t, 0, "unlimited", "unlimited", "0000003fffffffff")
	manifest, err := filepath.Abs("../../examples/kubernetes/b-nonroot-filecap.yaml")
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		args []string
		want int
	}{
		{"doctor", []string{"doctor", "--root", tree, "--json"}, -1},
		{"lint", []string{"lint", manifest}, 0},
		{"explain", []string{"explain", "/dev/null"}, 0},
		{"version", []string{"version"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := invocation{args: tc.args, env: runVars}.run(t)
			assert.NotEqual(t, ExitUsage, r.code, "stderr %q", r.stderr)
			if tc.want >= 0 {
				assert.Equal(t, tc.want, r.code, "stderr %q", r.stderr)
			}
			assert.NotContains(t, r.stderr, "bogus")
			assert.NotEmpty(t, r.stdout)
		})
	}
	t.Run("owned variable is read", func(t *testing.T) {
		r := invocation{args: []string{"doctor", "--root", tree}, env: []string{"NCCLRUN_MEMLOCK=bogus"}}.run(t)
		requireUsage(t, r, "--memlock")
	})
}

// The bare form is run: flags before CMD, the first non-flag word ends them.
func TestBareFormIsRun(t *testing.T) {
	for _, args := range [][]string{
		{"--quiet", "--no-transport-probe", "--", "sh", "-c", "exit 3"},
		{"--quiet", "--no-transport-probe", "sh", "-c", "exit 3"},
		{"run", "--quiet", "--no-transport-probe", "sh", "-c", "exit 3"},
	} {
		r := ncclrun(t, args...)
		assert.Equal(t, 3, r.code, "%q: %q", args, r.stderr)
	}
	requireUsage(t, ncclrun(t, "--hang-after", "-1s", "--", "true"), "--hang-after")
}

// A word after a command is that command's: a program named help or h
// is CMD (`ncclrun -- help`, as `ncclrun -- doctor` runs a program named
// doctor), and a file named help or h is explain's or lint's input, not
// the CLI library's help command.
func TestHelpWordIsAnArgument(t *testing.T) {
	dir := t.TempDir()
	log, err := os.ReadFile("../../diagnosis/testdata/corpus/memlock-seed.log")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "help"), log, 0o644))
	manifest, err := os.ReadFile("../../examples/kubernetes/seed-trap.yaml")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "h"), manifest, 0o644))
	path := fakeCommands(t, map[string]string{"help": "echo I am help \"$@\"\n", "h": "echo I am h \"$@\"\n"})
	for _, tc := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"--quiet", "--", "help"}, 0, "I am help"},
		{[]string{"--quiet", "--", "h", "x"}, 0, "I am h x"},
		{[]string{"run", "--quiet", "--", "help"}, 0, "I am help"},
		{[]string{"--quiet", "h"}, 0, "I am h"},
		{[]string{"explain", "help"}, 0, "memlock"},
		{[]string{"lint", "h"}, exitLintFinding, "ipc-lock-inert"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := invocation{args: tc.args, env: []string{path}, dir: dir}.run(t)
			assert.Equal(t, tc.code, r.code, "stderr %q", r.stderr)
			assert.Contains(t, r.stdout, tc.out)
			assert.NotContains(t, r.stdout, "USAGE:")
		})
	}
}

// `ncclrun help WORD` for a word that is no command is a usage error,
// exit 2 as docs/contract.md says, not the library's 3.
func TestHelpOfNoCommandIsUsage(t *testing.T) {
	for _, word := range []string{"bogus", "torchrun"} {
		t.Run(word, func(t *testing.T) {
			requireUsage(t, ncclrun(t, "help", word), word)
		})
	}
	r := ncclrun(t, "help", "doctor")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "ncclrun doctor")
}

// --hang-after and --on-hang are run's, parsed into settings for the
// hang watch: a duration and warn|stop, from the flag or the variable.
func TestHangFlags(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		env   string
		after time.Duration
		on    string
		bad   string
	}{
		{nil, "", 0, "warn", ""},
		{[]string{"--hang-after", "10m", "--on-hang", "STOP"}, "", 10 * time.Minute, "stop", ""},
		{[]string{"--hang-after=90s"}, "stop", 90 * time.Second, "stop", ""},
		{[]string{"--on-hang", "warn"}, "stop", 0, "warn", ""},
		{[]string{"--on-hang", "kill"}, "", 0, "", "--on-hang"},
		{[]string{"--hang-after", "-1s"}, "", 0, "", "--hang-after"},
		{[]string{"--hang-after", "soon"}, "", 0, "", "hang-after"},
	} {
		t.Run(strings.Join(tc.args, " ")+" "+tc.env, func(t *testing.T) {
			t.Setenv("NCCLRUN_ON_HANG", tc.env)
			var got settings
			err := parseWith(append(append([]string{"ncclrun"}, tc.args...), "--", "true"), func(s settings) { got = s })
			if tc.bad != "" {
				var ue *usageError
				require.True(t, errors.As(err, &ue), "want a usage error, got %v", err)
				assert.Contains(t, err.Error(), tc.bad)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.after, got.hang.after)
			assert.Equal(t, tc.on == "stop", got.hang.stop)
		})
	}
}

// version prints the version once, and the commit once: not again where
// the version (git describe's) already names it.
func TestVersionLine(t *testing.T) {
	build := runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH
	for _, tc := range []struct{ version, commit, want string }{
		{"1.4.0", "c0ffee1", "ncclrun 1.4.0 (commit c0ffee1, " + build + ")"},
		{"c0ffee1", "c0ffee1", "ncclrun c0ffee1 (" + build + ")"},
		{"c0ffee1-dirty", "c0ffee1", "ncclrun c0ffee1-dirty (" + build + ")"},
		{"v1.4.0-3-gc0ffee1", "c0ffee1", "ncclrun v1.4.0-3-gc0ffee1 (" + build + ")"},
		{"v1.4.0-3-gc0ffee1-dirty", "c0ffee1", "ncclrun v1.4.0-3-gc0ffee1-dirty (" + build + ")"},
		{"dev", "unknown", "ncclrun dev (" + build + ")"},
	} {
		assert.Equal(t, tc.want, versionLine(tc.version, tc.commit), tc.version)
		if tc.commit != "unknown" {
			assert.Equal(t, 1, strings.Count(tc.want, tc.commit), "the commit once")
		}
	}
}
