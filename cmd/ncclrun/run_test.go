package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ncclrun/ncclrun/internal/testutil"
)

func TestChildExitStatusPassesThrough(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 42, 78, 125, 126, 127, 128, 200, 255} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			r := ncclrun(t, "--quiet", "--", "sh", "-c", fmt.Sprintf("exit %d", n))
			require.Equal(t, n, r.code, "stderr: %q", r.stderr)
			require.Empty(t, r.stdout)
		})
	}
}

func TestChildKilledBySignalExits128PlusN(t *testing.T) {
	for _, tc := range []struct {
		sig  string
		want int
	}{{"HUP", 129}, {"INT", 130}, {"KILL", 137}, {"USR1", 138}, {"SEGV", 139}, {"TERM", 143}} {
		t.Run(tc.sig, func(t *testing.T) {
			r := ncclrun(t, "--quiet", "--", "sh", "-c", "kill -"+tc.sig+" $$")
			require.Equal(t, tc.want, r.code, "stderr: %q", r.stderr)
		})
	}
}

func TestCommandNotFoundOrNotExecutable(t *testing.T) {
	dir := t.TempDir()
	noExec := filepath.Join(dir, "script.sh")
	require.NoError(t, os.WriteFile(noExec, []byte("#!/bin/sh\necho hi\n"), 0o644))
	noInterp := filepath.Join(dir, "no-interpreter")
	require.NoError(t, os.WriteFile(noInterp, []byte("#!/nonexistent/interpreter\necho hi\n"), 0o755))
	crlf := filepath.Join(dir, "crlf")
	require.NoError(t, os.WriteFile(crlf, []byte("#!/bin/sh\r\necho hi\r\n"), 0o755))
	const interp = "cannot execute: the interpreter it needs was not found (its #! line's, or an ELF binary's loader)"
	for _, tc := range []struct {
		name string
		cmd  string
		want int
		say  string
	}{
		{"not on PATH", "ncclrun-no-such-command", ExitNotFound, "command not found"},
		{"no such path", filepath.Join(dir, "missing"), ExitNotFound, "command not found"},
		{"not executable", noExec, ExitNotExecutable, "not executable"},
		{"a directory", dir, ExitNotExecutable, "not executable"},
		{"no #! interpreter", noInterp, ExitNotFound, interp},
		{"#! line ending in CR", crlf, ExitNotFound, interp},
	} {
		for _, mode := range [][]string{nil, {"--no-watch"}, {"--drop-cap", "SYS_ADMIN"}} {
			t.Run(tc.name+strings.Join(mode, " "), func(t *testing.T) {
				r := ncclrun(t, append(append([]string{"--quiet"}, mode...), "--", tc.cmd)...)
				require.Equal(t, tc.want, r.code, "stderr: %q", r.stderr)
				require.Len(t, r.errLines(), 1, "one line: %q", r.stderr)
				require.True(t, strings.HasPrefix(r.stderr, "ncclrun: "), r.stderr)
				require.Contains(t, r.stderr, tc.cmd)
				require.Contains(t, r.stderr, tc.say)
			})
		}
	}
}

func TestUsageErrorsExit2WithOneLine(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		env      []string
		contains string
	}{
		{nil, nil, "no command"},
		{[]string{"run"}, nil, "no command"},
		{[]string{"--quiet"}, nil, "no command"},
		{[]string{"--bogus", "true"}, nil, "bogus"},
		{[]string{"run", "--bogus", "--", "true"}, nil, "bogus"},
		{[]string{"--memlock", "12q", "--", "true"}, nil, "--memlock"},
		{[]string{"--memlock", "1MiB:64KiB", "--", "true"}, nil, "--memlock"},
		{[]string{"--min-memlock=lots", "true"}, nil, "--min-memlock"},
		{[]string{"--probe", "x", "doctor"}, nil, "--probe"},
		{[]string{"doctor", "--probe", "x"}, nil, "--probe"},
		{[]string{"--drop-cap", "NOT_A_CAP", "true"}, nil, "NOT_A_CAP"},
		{[]string{"--user", "a:b:c", "true"}, nil, "--user"},
		{[]string{"--user", "4294967295", "--", "id"}, nil, "--user"},
		{[]string{"--user", "0:4294967295", "--", "id"}, nil, "--user"},
		{[]string{"--nccl-ib=maybe", "true"}, nil, "--nccl-ib"},
		{[]string{"--kill-after", "soon", "true"}, nil, "kill-after"},
		{[]string{"env", "--format", "yaml"}, nil, "--format"},
		{[]string{"doctor", "extra"}, nil, "extra"},
		{[]string{"explain", "/nonexistent/ncclrun.log"}, nil, "/nonexistent/ncclrun.log"},
		{[]string{"true"}, []string{"NCCLRUN_MEMLOCK=lots"}, "--memlock"},
		{[]string{"env"}, []string{"NCCLRUN_FORMAT=xml"}, "--format"},
	} {
		t.Run(strings.Join(tc.args, " ")+strings.Join(tc.env, " "), func(t *testing.T) {
			requireUsage(t, invocation{args: tc.args, env: tc.env}.run(t), tc.contains)
		})
	}
}

// strictFailing are flags under which the memlock check must fail on any
// machine: a 64 KiB limit and no CAP_IPC_LOCK for CMD.
var strictFailing = []string{"--memlock", "64KiB", "--drop-cap", "IPC_LOCK"}

func TestStrictRefusesToStartCommand(t *testing.T) {
	args := append(append([]string{"--strict"}, strictFailing...), "--", "sh", "-c", "echo started")
	r := ncclrun(t, args...)
	require.Equal(t, ExitStrict, r.code, "stderr: %q", r.stderr)
	require.Empty(t, r.stdout, "CMD must not start")
	require.Contains(t, r.stderr, "ncclrun: memlock: ")
	for _, l := range r.errLines() {
		require.True(t, strings.HasPrefix(l, "ncclrun: "), "line %q", l)
	}

	// The same through NCCLRUN_STRICT, and `run` spelled out.
	iv := invocation{args: append(append([]string{"run"}, strictFailing...), "--", "sh", "-c", "echo started"),
		env: []string{"NCCLRUN_STRICT=true"}}
	r = iv.run(t)
	require.Equal(t, ExitStrict, r.code, "stderr: %q", r.stderr)
	require.Empty(t, r.stdout)

	// Without --strict the command runs and the failed check is printed.
	r = ncclrun(t, append(append([]string{}, strictFailing...), "--", "sh", "-c", "echo started")...)
	require.Equal(t, 0, r.code, "stderr: %q", r.stderr)
	require.Equal(t, "started\n", r.stdout)
	require.Contains(t, r.stderr, "ncclrun: memlock: ")
	// --quiet silences it.
	r = ncclrun(t, append(append([]string{"--quiet"}, strictFailing...), "--", "sh", "-c", "echo started")...)
	require.Equal(t, "started\n", r.stdout)
	require.Empty(t, r.stderr)
}

func TestFlagsStopAtTheCommand(t *testing.T) {
	fakePath := fakeCommands(t, map[string]string{
		"torchrun": `for a in "$@"; do echo "$a"; done`,
		"doctor":   `echo "i am the doctor program: $*"`,
		"env":      `echo "not the env command"`,
	})
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"torchrun flags pass through", []string{"torchrun", "--nproc-per-node", "8", "train.py", "--quiet"},
			"--nproc-per-node\n8\ntrain.py\n--quiet\n"},
		{"ncclrun flags before", []string{"--quiet", "--nccl-debug", "INFO", "torchrun", "--nproc-per-node=8", "-h"},
			"--nproc-per-node=8\n-h\n"},
		{"double dash", []string{"--quiet", "--", "torchrun", "--", "x"}, "--\nx\n"},
		{"run spelled out", []string{"run", "--quiet", "torchrun", "--strict"}, "--strict\n"},
		{"run with double dash", []string{"--quiet", "run", "--", "torchrun", "a"}, "a\n"},
		{"program named doctor", []string{"--", "doctor", "--json"}, "i am the doctor program: --json\n"},
		{"program named env", []string{"--quiet", "--", "env"}, "not the env command\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := invocation{args: tc.args, env: []string{fakePath}}.run(t)
			require.Equal(t, 0, r.code, "stderr: %q", r.stderr)
			require.Equal(t, tc.want, r.stdout)
		})
	}
}

func TestOutputIsRelayedByteForByte(t *testing.T) {
	r := ncclrun(t, "--quiet", "--", "sh", "-c", `printf 'progress 1\rprogress 2\r'; printf 'err\000x' >&2; printf 'no newline'`)
	require.Equal(t, 0, r.code)
	require.Equal(t, "progress 1\rprogress 2\rno newline", r.stdout)
	require.Equal(t, "err\x00x", r.stderr)
}

// TestHealthyRunPrintsNothing: ncclrun adds nothing of its own to a
// healthy run (no failed check, no diagnosis), even when a check warned;
// the warning is held back and printed after the summary once the output
// shows a failure.
func TestHealthyRunPrintsNothing(t *testing.T) {
	r := ncclrun(t, "--quiet", "--", "true")
	require.Equal(t, 0, r.code)
	require.Empty(t, r.stdout)
	require.Empty(t, r.stderr)

	// 4 MiB is finite but above a 1 MiB minimum: memlock warns, nothing fails.
	warnOnly := []string{"--memlock", "4MiB", "--min-memlock", "1MiB", "--drop-cap", "IPC_LOCK"}
	r = ncclrun(t, append(warnOnly, "--", "true")...)
	require.Equal(t, 0, r.code)
	require.Empty(t, r.stdout)
	require.Empty(t, r.stderr, "a run whose preflight only warned prints nothing")

	shmWarn := `echo "n1:5:5 [0] misc/shmutils.cc:87 NCCL WARN Error: failed to extend /dev/shm/nccl-abc to 9637892 bytes, error: No space left on device (28)"; exit 1`
	r = ncclrun(t, append(warnOnly, "--", "sh", "-c", shmWarn)...)
	require.Equal(t, 1, r.code)
	lines := r.errLines()
	summary, held := -1, -1
	for i, l := range lines {
		require.True(t, strings.HasPrefix(l, "ncclrun: "), "line %q", l)
		if strings.HasPrefix(l, "ncclrun: summary:") {
			summary = i
		}
		if strings.HasPrefix(l, "ncclrun: memlock:") {
			held = i
		}
	}
	require.NotEqual(t, -1, summary, "stderr: %q", r.stderr)
	require.Greater(t, held, summary, "the held-back memlock warning follows the summary: %q", r.stderr)
}

func TestEnvironmentVariablesSetFlags(t *testing.T) {
	fakePath := fakeCommands(t, map[string]string{"show": `echo "NCCL_DEBUG=$NCCL_DEBUG NCCL_IB_DISABLE=$NCCL_IB_DISABLE"`})
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"defaults", nil, []string{"--quiet", "show"}, "NCCL_DEBUG=WARN NCCL_IB_DISABLE=\n"},
		{"NCCLRUN_NCCL_DEBUG", []string{"NCCLRUN_NCCL_DEBUG=INFO", "NCCLRUN_QUIET=1"}, []string{"show"}, "NCCL_DEBUG=INFO NCCL_IB_DISABLE=\n"},
		{"NCCLRUN_NO_IB", []string{"NCCLRUN_NO_IB=true"}, []string{"--quiet", "show"}, "NCCL_DEBUG=WARN NCCL_IB_DISABLE=1\n"},
		{"NCCLRUN_NCCL_IB=off wins over --no-ib", []string{"NCCLRUN_NCCL_IB=off"}, []string{"--quiet", "--no-ib", "show"}, "NCCL_DEBUG=WARN NCCL_IB_DISABLE=\n"},
		{"user's NCCL_DEBUG is kept", []string{"NCCL_DEBUG=TRACE"}, []string{"--quiet", "--nccl-debug", "INFO", "show"}, "NCCL_DEBUG=TRACE NCCL_IB_DISABLE=\n"},
		{"user's NCCL_IB_DISABLE is kept", []string{"NCCL_IB_DISABLE=0"}, []string{"--quiet", "--no-ib", "show"}, "NCCL_DEBUG=WARN NCCL_IB_DISABLE=0\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := invocation{args: tc.args, env: append([]string{fakePath}, tc.env...)}.run(t)
			require.Equal(t, 0, r.code, "stderr: %q", r.stderr)
			require.Equal(t, tc.want, r.stdout)
		})
	}
}

func TestNCCLConfigFileCountsAsSet(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "nccl.conf")
	require.NoError(t, os.WriteFile(conf, []byte("NCCL_DEBUG=VERSION\n"), 0o644))
	fakePath := fakeCommands(t, map[string]string{"show": `echo "NCCL_DEBUG=$NCCL_DEBUG"`})
	r := invocation{args: []string{"--quiet", "show"}, env: []string{fakePath, "NCCL_CONF_FILE=" + conf}}.run(t)
	require.Equal(t, 0, r.code, "stderr: %q", r.stderr)
	require.Equal(t, "NCCL_DEBUG=\n", r.stdout, "NCCL reads NCCL_DEBUG from its config file; ncclrun must not override it")
}

// memlockLine is NCCL's warning when ibv_reg_mr hits RLIMIT_MEMLOCK.
func memlockLines(t *testing.T) string {
	t.Helper()
	p := filepath.Join(corpusDir(t), "memlock-seed.log")
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	return string(b)
}

func TestDiagnosisPrintedOnceAndReport(t *testing.T) {
	log := memlockLines(t)
	dir := t.TempDir()
	logFile := filepath.Join(dir, "nccl.log")
	require.NoError(t, os.WriteFile(logFile, []byte(log), 0o644))
	report := filepath.Join(dir, "report.json")
	termLog := filepath.Join(dir, "termination-log")
	args := append(append([]string{"--report", report, "--termination-log", termLog}, strictFailing...),
		"--", "sh", "-c", `cat "$1"; cat "$1" >&2; exit 1`, "sh", logFile)
	r := ncclrun(t, args...)
	require.Equal(t, 1, r.code, "stderr: %q", r.stderr)
	require.Equal(t, log, r.stdout, "the child's stdout is relayed unchanged")
	require.True(t, strings.HasPrefix(r.stderr, log[:len(log)/2]) || strings.Contains(r.stderr, log), "the child's stderr is relayed: %q", r.stderr)

	doc := decodeJSON(t, mustRead(t, report))
	ds := doc["diagnoses"].([]any)
	require.NotEmpty(t, ds, "the memlock log under a 64 KiB limit without CAP_IPC_LOCK must be diagnosed")
	first := ds[0].(map[string]any)
	require.Equal(t, "memlock", first["id"])
	// Each diagnosis is printed once when first seen, although the log was
	// printed twice (stdout and stderr), then once in the summary.
	for _, d := range ds {
		title := d.(map[string]any)["title"].(string)
		require.Equal(t, 1, strings.Count(r.stderr, "ncclrun: "+title), "headline of %q once in %q", title, r.stderr)
	}
	require.Contains(t, r.stderr, "ncclrun: summary: ")

	tl := mustRead(t, termLog)
	require.NotEmpty(t, tl)
	require.LessOrEqual(t, len(tl), 4096)
	require.Contains(t, tl, "memlock")
}

func TestReportShape(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name   string
		script string
		code   int
		signal any
	}{
		{"exit", "exit 3", 3, nil},
		{"killed", "kill -KILL $$", 137, "SIGKILL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			report := filepath.Join(dir, tc.name+".json")
			r := ncclrun(t, "--quiet", "--report", report, "--no-ib", "--", "sh", "-c", tc.script)
			require.Equal(t, tc.code, r.code, "stderr: %q", r.stderr)
			doc := decodeJSON(t, mustRead(t, report))
			for _, k := range []string{"preflight", "env_added", "diagnoses", "exit_code", "signal"} {
				require.Contains(t, doc, k)
			}
			require.Contains(t, jpath(t, doc, "preflight"), "environment")
			require.Contains(t, jpath(t, doc, "preflight"), "checks")
			require.Equal(t, float64(tc.code), doc["exit_code"])
			require.Equal(t, tc.signal, doc["signal"])
			require.Equal(t, []any{}, doc["diagnoses"])
			require.Equal(t, "1", jpath(t, doc, "env_added", "NCCL_IB_DISABLE", "value"))
			require.Equal(t, "WARN", jpath(t, doc, "env_added", "NCCL_DEBUG", "value"))
			require.NotEmpty(t, jpath(t, doc, "env_added", "NCCL_DEBUG", "reason"))
		})
	}
}

func TestReportAndTerminationLogFailuresKeepTheExitStatus(t *testing.T) {
	r := ncclrun(t, "--quiet", "--report", "/nonexistent/dir/report.json",
		"--termination-log", "/nonexistent/dir/termination-log", "--", "sh", "-c", "exit 3")
	require.Equal(t, 3, r.code)
	require.Contains(t, r.stderr, "ncclrun: warning: --report")
	require.Contains(t, r.stderr, "ncclrun: warning: termination log")
}

func TestTerminationLog(t *testing.T) {
	dir := t.TempDir()
	healthy := filepath.Join(dir, "healthy")
	r := ncclrun(t, "--quiet", "--termination-log", healthy, "--", "true")
	require.Equal(t, 0, r.code)
	require.NoFileExists(t, healthy, "a healthy run writes no termination message")

	failed := filepath.Join(dir, "failed")
	r = invocation{args: []string{"--quiet", "--", "sh", "-c", "exit 3"},
		env: []string{"NCCLRUN_TERMINATION_LOG=" + failed}}.run(t)
	require.Equal(t, 3, r.code)
	require.Contains(t, mustRead(t, failed), "exited with status 3")
}

func TestTorchrunErrorFileInReport(t *testing.T) {
	// A fake torchrun that behaves like the elastic agent: it writes the
	// first failing rank's exception to TORCHELASTIC_ERROR_FILE.
	fakePath := fakeCommands(t, map[string]string{"torchrun": `
test -n "$TORCHELASTIC_ERROR_FILE" || { echo "no TORCHELASTIC_ERROR_FILE" >&2; exit 99; }
cat > "$TORCHELASTIC_ERROR_FILE" <<'JSON'
{"message": {"message": "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1269, unhandled system error", "extraInfo": {"py_callstack": "Traceback (most recent call last):\n  File \"train.py\", line 3", "timestamp": "1700000000"}}}
JSON
exit 1`})
	report := filepath.Join(t.TempDir(), "report.json")
	r := invocation{args: []string{"--quiet", "--report", report, "torchrun", "--nproc-per-node", "2", "train.py"}, env: []string{fakePath}}.run(t)
	require.Equal(t, 1, r.code, "stderr: %q", r.stderr)
	doc := decodeJSON(t, mustRead(t, report))
	require.Equal(t, "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1269, unhandled system error", jpath(t, doc, "torchrun_error", "message"))
	require.Contains(t, jpath(t, doc, "torchrun_error", "traceback"), "train.py")
	require.Equal(t, "1700000000", jpath(t, doc, "torchrun_error", "timestamp"))

	// A user's own TORCHELASTIC_ERROR_FILE is left alone.
	own := filepath.Join(t.TempDir(), "own.json")
	r = invocation{args: []string{"--quiet", "--report", report, "torchrun"}, env: []string{fakePath, "TORCHELASTIC_ERROR_FILE=" + own}}.run(t)
	require.Equal(t, 1, r.code)
	require.FileExists(t, own)
}

func TestNoWatchExecsInPlace(t *testing.T) {
	r := ncclrun(t, "--quiet", "--no-watch", "--", "sh", "-c", `echo "pid $$ ppid $PPID"; exit 7`)
	require.Equal(t, 7, r.code, "stderr: %q", r.stderr)
	require.Regexp(t, `^pid \d+ ppid \d+\n$`, r.stdout)
	r = ncclrun(t, "--quiet", "--no-watch", "--", "ncclrun-no-such-command")
	require.Equal(t, ExitNotFound, r.code, "stderr: %q", r.stderr)
}

func TestProbeMlock(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireTool(t, "prlimit")
	testutil.RequireTool(t, "setpriv")
	r := ncclrun(t, "probe-mlock", "1MiB")
	require.Equal(t, 0, r.code, "root with CAP_IPC_LOCK pins past any limit: %q", r.stderr)
	r = invocation{pre: []string{"prlimit", "--memlock=65536:65536", "setpriv", "--reuid", "1000", "--regid", "1000",
		"--clear-groups", "--inh-caps", "-all", "--bounding-set", "-all"}, args: []string{"probe-mlock", "1MiB"}}.run(t)
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "ncclrun: mlock 1 MiB: ")
}

func mustRead(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	return string(b)
}

func TestUserFlagRunsCommandAsThatUser(t *testing.T) {
	testutil.RequireRoot(t)
	r := ncclrun(t, "--quiet", "--user", "1000:1000", "--", "sh", "-c", "id -u; id -g; id -G")
	require.Equal(t, 0, r.code, "stderr: %q", r.stderr)
	require.Equal(t, "1000\n1000\n1000\n", r.stdout)
	r = invocation{args: []string{"--quiet", "--", "id", "-u"}, env: []string{"NCCLRUN_USER=1000"}}.run(t)
	require.Equal(t, "1000\n", r.stdout, "stderr: %q", r.stderr)
}

// TestTerminatingSignalIsForwarded: SIGTERM to ncclrun reaches CMD, whose
// own exit status ncclrun then exits with. Readiness is a line on the
// child's stdout, read through a pipe; no sleeps.
func TestTerminatingSignalIsForwarded(t *testing.T) {
	cmd := exec.Command(bin, "--quiet", "--", "sh", "-c", `trap 'echo got TERM; exit 42' TERM; echo ready; while :; do sleep 1; done`)
	cmd.Env = baseEnv(t)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var errb strings.Builder
	cmd.Stderr = &errb
	require.NoError(t, cmd.Start())
	rd := bufio.NewReader(out)
	line, err := rd.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "ready\n", line)
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	rest, _ := io.ReadAll(rd)
	err = cmd.Wait()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "stderr: %q", errb.String())
	require.Equal(t, 42, ee.ExitCode())
	require.Equal(t, "got TERM\n", string(rest))
}

// TestGenericDiagnosisWaitsForTheCause: PyTorch's DistBackendError on
// stderr may arrive before NCCL's WARN on stdout; the generic nccl-error
// must not be printed live, and is printed at exit only when nothing more
// specific was found.
func TestGenericDiagnosisWaitsForTheCause(t *testing.T) {
	generic := `echo "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5" >&2`
	warn := `echo "n1:7:7 [0] misc/ibvwrap.cc:169 NCCL WARN Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory"`

	r := ncclrun(t, "--quiet", "--", "sh", "-c", generic+"; "+warn+"; exit 1")
	require.Equal(t, 1, r.code)
	var mine []string
	for _, l := range r.errLines() {
		if strings.HasPrefix(l, "ncclrun: ") {
			mine = append(mine, l)
		}
	}
	require.NotEmpty(t, mine, "stderr: %q", r.stderr)
	require.Contains(t, mine[0], "locked-memory", "the specific cause is the first thing ncclrun says: %q", r.stderr)
	require.NotContains(t, r.stderr, "does not show a more specific cause")

	r = ncclrun(t, "--quiet", "--", "sh", "-c", generic+"; exit 1")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "ncclrun: NCCL failed", "with nothing specific the generic diagnosis is printed at exit")
}

// TestNCCLDebugFileIsDiagnosed: with NCCL_DEBUG_FILE NCCL's lines go to
// per-process files (%h host, %p pid), not to the output; run reads the
// files written during the run.
func TestNCCLDebugFileIsDiagnosed(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, "nccl.old.1")
	require.NoError(t, os.WriteFile(stale, []byte("n0:1:1 [0] misc/shmutils.cc:87 NCCL WARN Error: failed to extend /dev/shm/nccl-x to 9637892 bytes, error: No space left on device (28)\n"), 0o644))
	old := time.Now().Add(-time.Hour)
	require.NoError(t, os.Chtimes(stale, old, old))

	warn := `echo "n1:$$:1 [0] misc/ibvwrap.cc:169 NCCL WARN Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory" > "$D/nccl.$(hostname | cut -d. -f1).$$"; exit 1`
	r := invocation{
		args: []string{"--report", filepath.Join(dir, "r.json"), "--", "sh", "-c", warn},
		env:  []string{"D=" + dir, "NCCL_DEBUG_FILE=" + filepath.Join(dir, "nccl.%h.%p")},
	}.run(t)
	require.Equal(t, 1, r.code)
	require.Empty(t, r.stdout)
	data, err := os.ReadFile(filepath.Join(dir, "r.json"))
	require.NoError(t, err)
	rep := decodeJSON(t, string(data))
	ds := rep["diagnoses"].([]any)
	require.Len(t, ds, 1, "the stale file from before the run is not read: %v", ds)
	require.Contains(t, []string{"memlock", "memory-registration"}, ds[0].(map[string]any)["id"])
}

// A symbolic link at --report or --termination-log (/dev/stdout in a
// container) is neither replaced nor written through: a warning line, the
// link as it was, CMD's exit status.
func TestReportAndTerminationLogLeaveASymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	require.NoError(t, os.WriteFile(target, []byte("kept\n"), 0o644))
	for _, tc := range []struct{ flag, warning string }{
		{"--report", "ncclrun: warning: --report: "},
		{"--termination-log", "ncclrun: warning: termination log: "},
	} {
		t.Run(tc.flag, func(t *testing.T) {
			link := filepath.Join(t.TempDir(), "link")
			require.NoError(t, os.Symlink(target, link))
			r := ncclrun(t, "--quiet", tc.flag, link, "--", "sh", "-c", "exit 3")
			require.Equal(t, 3, r.code, "stderr: %q", r.stderr)
			require.Len(t, r.errLines(), 1, "stderr: %q", r.stderr)
			require.Contains(t, r.stderr, tc.warning)
			require.Contains(t, r.stderr, "a symbolic link, not a regular file")
			dest, err := os.Readlink(link)
			require.NoError(t, err, "still a symbolic link")
			require.Equal(t, target, dest)
			require.Equal(t, "kept\n", mustRead(t, target), "not written through")
		})
	}
}
