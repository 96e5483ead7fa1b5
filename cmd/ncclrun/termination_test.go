package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ncclrun/ncclrun/internal/testutil"
	"github.com/ncclrun/ncclrun/nccllog"
	"github.com/ncclrun/ncclrun/preflight"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Promise (docs/contract.md "Termination message"): every non-zero exit of
// run leaves one short message in the termination log, also when CMD never
// ran; a zero exit leaves none.
func TestTerminationMessageForEveryExit(t *testing.T) {
	dir := t.TempDir()
	notExec := filepath.Join(dir, "not-executable")
	require.NoError(t, os.WriteFile(notExec, []byte("#!/bin/sh\necho never\n"), 0o644))
	cases := []struct {
		name string
		pre  []string
		args []string
		code int
		want []string // substrings of the message
	}{
		{"strict", nil, append(append([]string{"--strict"}, strictFailing...), "--", "sh", "-c", "echo started"), ExitStrict,
			[]string{"--strict: preflight failed, sh not started (exit status 78)", "memlock: ", "fix: "}},
		{"not found", nil, []string{"--", "/nonexistent/train"}, ExitNotFound,
			[]string{"/nonexistent/train", "(exit status 127)"}},
		{"not executable", nil, []string{"--", notExec}, ExitNotExecutable,
			[]string{notExec, "(exit status 126)"}},
		{"no such user", nil, []string{"--user", "no-such-user-ncclrun", "--", "true"}, ExitUsage,
			[]string{"--user", "no-such-user-ncclrun", "(exit status 2)"}},
		{"CMD's own failure", nil, []string{"--", "sh", "-c", "exit 3"}, 3,
			[]string{"CMD exited with status 3; no NCCL failure found"}},
		// Root without CAP_SETUID/SETGID: --user cannot switch users.
		{"--user cannot switch", []string{"setpriv", "--bounding-set", "-setuid,-setgid", "--inh-caps", "-all"},
			[]string{"--user", "1000:1000", "--", "true"}, ExitInternal, []string{"(exit status 125)"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.pre != nil {
				testutil.RequireRoot(t)
				testutil.RequireTool(t, "setpriv")
			}
			tl := filepath.Join(t.TempDir(), "termination-log")
			r := invocation{pre: tc.pre, args: append([]string{"--quiet", "--termination-log", tl}, tc.args...)}.run(t)
			require.Equal(t, tc.code, r.code, "stderr: %q", r.stderr)
			msg := mustRead(t, tl)
			for _, w := range tc.want {
				assert.Contains(t, msg, w)
			}
			assert.LessOrEqual(t, len(msg), terminationLimit)
			assert.NotContains(t, msg, "\n\n", "one short message")
		})
	}
	t.Run("zero exit", func(t *testing.T) {
		tl := filepath.Join(t.TempDir(), "termination-log")
		r := ncclrun(t, "--quiet", "--termination-log", tl, "--", "true")
		require.Equal(t, 0, r.code)
		assert.NoFileExists(t, tl)
	})
}

// A mistake that the flag parser itself finds (a flag run does not have,
// a flag without its value, an NCCLRUN_* variable that does not parse)
// leaves the termination message too, in --termination-log given before
// it or in NCCLRUN_TERMINATION_LOG: in a pod it is the most common
// mistake in the command line.
func TestTerminationMessageForFlagMistakes(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  []string
		want string
	}{
		{"unknown flag", []string{"--termination-log", "TL", "--bogus", "--", "true"}, nil, "--bogus is not a flag of run"},
		{"unknown flag after run", []string{"run", "--termination-log=TL", "--probe", "1MiB", "--", "true"}, nil, "--probe is not a flag of run"},
		{"variable names the log", []string{"--no-such-flag", "--", "true"}, []string{"NCCLRUN_TERMINATION_LOG=TL"}, "--no-such-flag is not a flag of run"},
		{"bad variable", []string{"--termination-log", "TL", "--", "true"}, []string{"NCCLRUN_STRICT=maybe"}, "NCCLRUN_STRICT"},
		{"value missing", []string{"--termination-log", "TL", "--kill-after"}, nil, "kill-after"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tl := filepath.Join(t.TempDir(), "termination-log")
			subst := func(in []string) []string {
				out := make([]string, len(in))
				for i, a := range in {
					out[i] = strings.ReplaceAll(a, "TL", tl)
				}
				return out
			}
			r := invocation{args: subst(tc.args), env: subst(tc.env)}.run(t)
			requireUsage(t, r, tc.want)
			msg := mustRead(t, tl)
			assert.Contains(t, msg, tc.want)
			assert.True(t, strings.HasSuffix(msg, "(exit status 2)\n"), "%q", msg)
		})
	}
}

func TestEarlyExitText(t *testing.T) {
	rep := preflight.Report{Checks: []preflight.Result{
		{ID: "memlock", Status: preflight.Fail, Summary: "RLIMIT_MEMLOCK 64 KiB", Fix: "raise it"},
		{ID: "shm", Status: preflight.Warn, Summary: "64 MiB"},
	}}
	cases := []struct {
		name string
		err  error
		rep  *preflight.Report
		want string
	}{
		{"nil", nil, nil, ""},
		{"zero", exitWith(0), nil, ""},
		{"strict", exitWith(ExitStrict), &rep, "ncclrun: --strict: preflight failed, train not started (exit status 78)\nmemlock: RLIMIT_MEMLOCK 64 KiB\nfix: raise it\n"},
		{"signal before the start", exitWith(128 + 15), nil, "ncclrun: SIGTERM received before train started; not started (exit status 143)\n"},
		{"usage", usagef("--user: no such user"), nil, "ncclrun: --user: no such user (exit status 2)\n"},
		{"start", &startError{cmd: "train", err: errors.New("boom")}, nil, "ncclrun: train: boom (exit status 125)\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, earlyExitText(tc.err, tc.rep, "train"))
		})
	}
}

// TestTerminationTextPrintable: the termination message (read by `kubectl
// describe`) quotes torchrun's error message and a failed check's summary
// with their control characters as escapes.
func TestTerminationTextPrintable(t *testing.T) {
	text := terminationText(nil, nil, 1, "", &nccllog.TorchrunError{Message: "KeyError: 'st\x1b[2Jep'"}, 4096)
	assert.Contains(t, text, `KeyError: 'st\x1b[2Jep'`)
	assert.NotContains(t, text, "\x1b")
	rep := preflight.Report{Checks: []preflight.Result{{ID: "memlock", Status: preflight.Fail, Summary: "low \x1b]0;x\x07", Fix: "raise it"}}}
	strict := strictText(rep, "train")
	assert.Contains(t, strict, `memlock: low \x1b]0;x\x07`)
	assert.NotContains(t, strict, "\x1b")
}
