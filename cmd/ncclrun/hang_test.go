package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ncclrun/ncclrun/hang"
	"github.com/ncclrun/ncclrun/hang/hangtest"
	"github.com/ncclrun/ncclrun/launcher"
)

// hangJob runs ncclrun with args in front of a shell script as CMD, with
// stdin a pipe the script reads from (its silence lasts until the test
// closes it) and stderr read line by line: until is called on each line,
// and once it returns true, then() runs. It returns the exit status,
// stdout and stderr's lines.
func hangJob(t *testing.T, env []string, args []string, script string, until func(string) bool, then func(stdin io.WriteCloser)) (int, string, []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, bin, append(append(args, "run", "--", "sh", "-c"), script)...)
	c.Env = append(baseEnv(t), env...)
	var out strings.Builder
	c.Stdout = &out
	stdin, err := c.StdinPipe()
	require.NoError(t, err)
	defer stdin.Close()
	errPipe, err := c.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, c.Start())
	var lines []string
	done := false
	sc := bufio.NewScanner(errPipe)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if !done && until(sc.Text()) {
			done = true
			then(stdin)
		}
	}
	err = c.Wait()
	require.NoError(t, ctx.Err(), "ncclrun did not end; stderr %q", lines)
	code := 0
	var ee *exec.ExitError
	if err != nil {
		require.ErrorAs(t, err, &ee)
		code = ee.ExitCode()
	}
	return code, out.String(), lines
}

func readReport(t *testing.T, path string) runReport {
	t.Helper()
	var r runReport
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &r), "%s", b)
	return r
}

// A dump in the flight recorder's schema (hang/testdata), which the job
// "writes" where ncclrun told torch to.
var frFixture, _ = filepath.Abs("../../hang/testdata/flightrecorder/torch-2.10_rank_1")

// TestHangAfter: a job that prints, writes its flight-recorder dump where
// ncclrun's variable says, then falls silent: after --hang-after ncclrun
// reads RAS at the job's NCCL_RAS_ADDR (here a fake server) into the
// evidence directory and says so on stderr; CMD's output is untouched and
// its exit status is ncclrun's (warn is the default). The report's hang
// has certainty unknown (no line named a rank), the evidence directory,
// RAS's summary and the dump's.
func TestHangAfter(t *testing.T) {
	ras := &hangtest.RAS{JSON: `{"nccl_version": "2.28.9", "communicators": [{"hash": "0x1", "ranks": [
		{"rank": 0, "host": "10.0.0.1", "pid": 10, "collective_counts": {"AllReduce": 6}},
		{"rank": 1, "host": "10.0.0.1", "pid": 11, "collective_counts": {"AllReduce": 5}}], "missing_ranks": []}]}`}
	addr := ras.Serve(t)
	rep := filepath.Join(t.TempDir(), "report.json")
	script := `echo step 1; cp '` + frFixture + `' "${TORCH_FR_DUMP_TEMP_FILE}1"; read x; echo done`
	code, stdout, stderr := hangJob(t, []string{"NCCL_RAS_ADDR=" + addr},
		[]string{"--hang-after", "200ms", "--report", rep}, script,
		func(l string) bool { return strings.HasPrefix(l, "ncclrun: suspected hang") },
		func(stdin io.WriteCloser) { stdin.Close() })
	assert.Equal(t, 0, code, "stderr %q", stderr)
	assert.Equal(t, "step 1\ndone\n", stdout, "CMD's output is its own")
	require.NotEmpty(t, stderr)
	assert.Contains(t, stderr[0], "no output from CMD for 200ms (--hang-after)")
	assert.Contains(t, stderr[0], "rank 1 of 0x1 behind in AllReduce (5 < 6), unchanged 250ms later")

	r := readReport(t, rep)
	require.NotNil(t, r.Hang, "the report carries the hang")
	assert.Equal(t, "unknown", r.Hang.Certainty)
	require.NotEmpty(t, r.Hang.EvidenceDir)
	t.Cleanup(func() { os.RemoveAll(r.Hang.EvidenceDir) })
	require.NotNil(t, r.Hang.RAS)
	assert.Equal(t, addr, r.Hang.RAS.Addr, "the user's NCCL_RAS_ADDR is the job's")
	assert.Equal(t, []hang.RASBehind{{Comm: "0x1", Op: "AllReduce", Max: 6, Ranks: []hang.RASRank{{Comm: "0x1", Rank: 1, Host: "10.0.0.1", PID: 11, Count: 5}}}}, r.Hang.RAS.Behind)
	assert.True(t, r.Hang.RAS.Confirmed, "the second query saw the same lag")
	assert.FileExists(t, filepath.Join(r.Hang.EvidenceDir, "ras-status.json"))
	assert.FileExists(t, filepath.Join(r.Hang.EvidenceDir, "capture.json"))
	require.Len(t, r.Hang.FlightRecorder, 1)
	d := r.Hang.FlightRecorder[0]
	assert.Equal(t, 1, d.Rank)
	assert.Equal(t, filepath.Join(r.Hang.EvidenceDir, frPrefixName+"1"), d.File, "the dump went to ncclrun's evidence directory")
	require.Len(t, d.PGs, 1)
	assert.Equal(t, int64(5), d.PGs[0].LastCompleted)
	require.NotEmpty(t, d.PGs[0].Stalled)
	assert.Equal(t, "nccl:all_reduce", d.PGs[0].Stalled[0].Op)
	assert.Contains(t, r.EnvAdded, "TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
	assert.NotContains(t, r.EnvAdded, "NCCL_RAS_ADDR", "set by the user")
}

// TestHangAfterAsksFlightRecorder: with --hang-after, each rank gets a
// dump pipe in the evidence directory (TORCH_NCCL_DEBUG_INFO_PIPE_FILE);
// the silent job's capture writes to every pipe a rank holds open, the
// rank (here a shell playing torch's monitor thread) dumps its flight
// recorder while the job runs, and the report has the dump and the ranks
// asked. The pipe is gone afterwards.
func TestHangAfterAsksFlightRecorder(t *testing.T) {
	rep := filepath.Join(t.TempDir(), "report.json")
	script := `p="${TORCH_NCCL_DEBUG_INFO_PIPE_FILE}1.pipe"; mkfifo "$p" && exec 3<>"$p" || exit 9
(read -r b <&3; cp '` + frFixture + `' "${TORCH_FR_DUMP_TEMP_FILE}1") &
echo step 1; read x; wait; echo done`
	code, stdout, stderr := hangJob(t, []string{"NCCL_RAS_ENABLE=0"},
		[]string{"--hang-after", "300ms", "--report", rep}, script,
		func(l string) bool { return strings.HasPrefix(l, "ncclrun: suspected hang") },
		func(stdin io.WriteCloser) { stdin.Close() })
	assert.Equal(t, 0, code, "stderr %q", stderr)
	assert.Equal(t, "step 1\ndone\n", stdout)
	require.NotEmpty(t, stderr)
	assert.Contains(t, stderr[0], "1 rank(s) asked for a flight-recorder dump")

	r := readReport(t, rep)
	require.NotNil(t, r.Hang)
	t.Cleanup(func() { os.RemoveAll(r.Hang.EvidenceDir) })
	pipe := filepath.Join(r.Hang.EvidenceDir, frPipeName+"1.pipe")
	assert.Equal(t, []hang.Pipe{{Rank: 1, File: pipe}}, r.Hang.FRPipes)
	require.Len(t, r.Hang.FlightRecorder, 1, "the rank dumped when asked")
	assert.Equal(t, 1, r.Hang.FlightRecorder[0].Rank)
	assert.NoFileExists(t, pipe, "torch leaves its pipe; ncclrun removes it")
	assert.Contains(t, r.EnvAdded, "TORCH_NCCL_DEBUG_INFO_PIPE_FILE")
}

// TestOnHangStopWaitsForAskedDumps: with --on-hang stop, the ranks asked
// for a dump get time to write it before they are stopped. The rank here
// writes its dump half a second after it was asked (torch looks at its
// pipe about once a second), and dies with CMD when stopped.
func TestOnHangStopWaitsForAskedDumps(t *testing.T) {
	rep := filepath.Join(t.TempDir(), "report.json")
	script := `trap 'kill 0' TERM; p="${TORCH_NCCL_DEBUG_INFO_PIPE_FILE}1.pipe"; mkfifo "$p" && exec 3<>"$p" || exit 9
(read -r b <&3; sleep 0.5; cp '` + frFixture + `' "${TORCH_FR_DUMP_TEMP_FILE}1") &
echo step 1; read x`
	code, _, stderr := hangJob(t, []string{"NCCL_RAS_ENABLE=0"},
		[]string{"--hang-after", "300ms", "--on-hang", "stop", "--report", rep}, script,
		func(string) bool { return false }, func(io.WriteCloser) {})
	assert.Equal(t, ExitHang, code, "stderr %q", stderr)
	r := readReport(t, rep)
	require.NotNil(t, r.Hang)
	t.Cleanup(func() { os.RemoveAll(r.Hang.EvidenceDir) })
	require.Len(t, r.Hang.FRPipes, 1)
	require.Len(t, r.Hang.FlightRecorder, 1, "the dump asked for was written before the stop")
	assert.Empty(t, r.Hang.FlightRecorder[0].Error)
}

// TestOnHangStop: the first watchdog timeout line starts the capture;
// with --on-hang stop ncclrun then stops CMD as SIGTERM would and exits
// ExitHang, the report keeping CMD's own status and the termination
// message saying why first.
func TestOnHangStop(t *testing.T) {
	dir := t.TempDir()
	rep, tl := filepath.Join(dir, "report.json"), filepath.Join(dir, "termination")
	script := `echo '[rank1]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [PG ID 0 PG GUID 0(default_pg) Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=6, OpType=ALLREDUCE, NumelIn=1024, NumelOut=1024, Timeout(ms)=600000) ran for 600010 milliseconds before timing out.' >&2; read x`
	code, _, stderr := hangJob(t, []string{"NCCL_RAS_ENABLE=0"}, []string{"--on-hang", "stop", "--report", rep, "--termination-log", tl}, script,
		func(string) bool { return false }, func(io.WriteCloser) {})
	assert.Equal(t, ExitHang, code, "stderr %q", stderr)
	joined := strings.Join(stderr, "\n")
	assert.Contains(t, joined, "ncclrun: suspected hang (collective-timeout): RAS off")
	assert.Contains(t, joined, "--on-hang stop: stopping sh as SIGTERM would; ncclrun will exit 80")
	r := readReport(t, rep)
	assert.Equal(t, 128+int(unix.SIGTERM), r.ExitCode, "CMD ended of the SIGTERM ncclrun sent")
	require.NotNil(t, r.Hang)
	assert.Equal(t, "collective-timeout", r.Hang.Trigger)
	assert.Nil(t, r.Hang.RAS, "NCCL_RAS_ENABLE=0: RAS is not asked")
	require.NotEmpty(t, r.Hang.EvidenceDir)
	t.Cleanup(func() { os.RemoveAll(r.Hang.EvidenceDir) })
	msg, err := os.ReadFile(tl)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(msg), "ncclrun: --on-hang stop: CMD was stopped because it hung (collective-timeout)"), "%s", msg)
}

// A run without a hang leaves no evidence directory behind and no hang
// in the report.
func TestNoHangNoEvidence(t *testing.T) {
	tmp := t.TempDir()
	rep := filepath.Join(tmp, "report.json")
	r := invocation{args: []string{"--report", rep, "run", "--", "sh", "-c", `echo "$TORCH_FR_DUMP_TEMP_FILE"`}, env: []string{"TMPDIR=" + tmp}}.run(t)
	require.Equal(t, 0, r.code, "stderr %q", r.stderr)
	assert.True(t, strings.HasPrefix(r.stdout, filepath.Join(tmp, "ncclrun-hang-")), "the dumps go under TMPDIR: %q", r.stdout)
	assert.NoDirExists(t, filepath.Dir(strings.TrimSpace(r.stdout)), "an empty evidence directory is removed")
	assert.Nil(t, readReport(t, rep).Hang)
}

// Where TMPDIR cannot be written there is no evidence directory: the
// capture still reads RAS for the report and the line, but writes no file,
// least of all into ncclrun's working directory, and the line says why.
func TestHangWithoutEvidenceDirWritesNothing(t *testing.T) {
	cwd := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, bin, "--quiet", "--hang-after", "200ms", "--", "sh", "-c", "read x; true")
	c.Env = append(baseEnv(t), "TMPDIR=/nonexistent/tmp")
	c.Dir = cwd
	stdin, err := c.StdinPipe()
	require.NoError(t, err)
	defer stdin.Close()
	errPipe, err := c.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, c.Start())
	var lines []string
	sc := bufio.NewScanner(errPipe)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if strings.HasPrefix(sc.Text(), "ncclrun: suspected hang") {
			stdin.Close()
		}
	}
	require.NoError(t, c.Wait(), "stderr %q", lines)
	require.Len(t, lines, 1, "stderr %q", lines)
	assert.Contains(t, lines[0], "no evidence directory")
	assert.NotRegexp(t, `evidence in $`, lines[0])
	left, err := os.ReadDir(cwd)
	require.NoError(t, err)
	assert.Empty(t, left, "nothing written to ncclrun's working directory")
}

// A CMD that never started (not found, not executable, refused by
// --strict) leaves no evidence directory behind either: each such run left
// an empty ncclrun-hang-* in TMPDIR.
func TestNoStartNoEvidence(t *testing.T) {
	notExec := filepath.Join(t.TempDir(), "not-executable")
	require.NoError(t, os.WriteFile(notExec, []byte("#!/bin/sh\necho never\n"), 0o644))
	for _, tc := range []struct {
		name string
		args []string
		env  string
		code int
	}{
		{"not found", []string{"--", "/nonexistent/train"}, "", ExitNotFound},
		{"not executable", []string{"--", notExec}, "", ExitNotExecutable},
		// The network check fails: no interface matches.
		{"strict", []string{"--strict", "--", "true"}, "NCCL_SOCKET_IFNAME==no-such-if0", ExitStrict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmp := t.TempDir()
			env := []string{"TMPDIR=" + tmp}
			if tc.env != "" {
				env = append(env, tc.env)
			}
			r := invocation{args: append([]string{"--quiet"}, tc.args...), env: env}.run(t)
			require.Equal(t, tc.code, r.code, "stderr %q", r.stderr)
			left, err := filepath.Glob(filepath.Join(tmp, "ncclrun-hang-*"))
			require.NoError(t, err)
			assert.Empty(t, left, "an empty evidence directory is removed")
		})
	}
}

func TestHangEnv(t *testing.T) {
	p := hangPlan{dir: "/tmp/d", frPrefix: "/tmp/d/" + frPrefixName, rasAddr: "127.0.0.1:4242"}
	names := func(vs []launcher.EnvVar) map[string]string {
		m := map[string]string{}
		for _, v := range vs {
			m[v.Name] = v.Value
			assert.NotEmpty(t, v.Reason, v.Name)
		}
		return m
	}
	assert.Equal(t, map[string]string{
		"NCCL_RAS_ADDR":                   "127.0.0.1:4242",
		"TORCH_FR_BUFFER_SIZE":            "2000",
		"TORCH_NCCL_TRACE_BUFFER_SIZE":    "2000",
		"TORCH_NCCL_DUMP_ON_TIMEOUT":      "1",
		"TORCH_FR_DUMP_ON_TIMEOUT":        "1",
		"TORCH_FR_DUMP_TEMP_FILE":         "/tmp/d/" + frPrefixName,
		"TORCH_NCCL_DEBUG_INFO_TEMP_FILE": "/tmp/d/" + frPrefixName,
		"TORCH_NCCL_ASYNC_ERROR_HANDLING": "3",
		"PYTHONFAULTHANDLER":              "1",
	}, names(hangEnv(nil, p)))
	// A variable torch reads under two names: the user's one name keeps
	// ncclrun from adding the other.
	got := names(hangEnv([]string{"TORCH_NCCL_TRACE_BUFFER_SIZE=20000", "TORCH_FR_DUMP_TEMP_FILE=/ckpt/fr_", "NCCL_ASYNC_ERROR_HANDLING=1", "PYTHONFAULTHANDLER="}, p))
	for _, n := range []string{"TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE", "TORCH_NCCL_ASYNC_ERROR_HANDLING", "PYTHONFAULTHANDLER"} {
		assert.NotContains(t, got, n)
	}
	assert.Contains(t, got, "TORCH_NCCL_DUMP_ON_TIMEOUT")
	// The dump pipes only where the plan has them (--hang-after).
	p.frPipe = "/tmp/d/" + frPipeName
	assert.Equal(t, p.frPipe, names(hangEnv(nil, p))["TORCH_NCCL_DEBUG_INFO_PIPE_FILE"])
	r := ncclrun(t, "run", "--", "sh", "-c", `echo "${TORCH_NCCL_DEBUG_INFO_PIPE_FILE:-unset}"`)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "unset\n", r.stdout, "no pipes without --hang-after")
}

// ncclrun env lists hang capture's variables, with run's per-job parts as
// patterns; --no-watch adds none of them.
func TestEnvListsHangVariables(t *testing.T) {
	root := fakeTree(t, 0, "unlimited", "unlimited", "00000000a80425fb")
	r := invocation{args: []string{"env", "--format", "json", "--root", root}}.run(t)
	require.Equal(t, 0, r.code, "stderr %q", r.stderr)
	doc := decodeJSON(t, r.stdout)
	for _, n := range []string{"NCCL_RAS_ADDR", "TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE", "TORCH_NCCL_DUMP_ON_TIMEOUT", "TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE", "TORCH_NCCL_ASYNC_ERROR_HANDLING", "PYTHONFAULTHANDLER"} {
		assert.Contains(t, doc, n)
	}
	assert.Equal(t, "127.0.0.1:PORT", doc["NCCL_RAS_ADDR"].(map[string]any)["value"])
	r = invocation{args: []string{"env", "--format", "json", "--root", root, "--no-watch"}}.run(t)
	require.Equal(t, 0, r.code)
	assert.NotContains(t, decodeJSON(t, r.stdout), "PYTHONFAULTHANDLER")
}

func TestHangFlagsUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  []string
	}{
		{args: []string{"--on-hang", "kill", "run", "--", "true"}},
		{args: []string{"--hang-after", "-1s", "run", "--", "true"}},
		{args: []string{"--hang-after", "soon", "run", "--", "true"}},
		{args: []string{"run", "--", "true"}, env: []string{"NCCLRUN_ON_HANG=maybe"}},
	} {
		r := invocation{args: tc.args, env: tc.env}.run(t)
		assert.Equal(t, ExitUsage, r.code, "%v %v: %q", tc.args, tc.env, r.stderr)
	}
}

// Once the main child has exited, --hang-after's silence is no hang: the
// descendants that still hold the output are being torn down. Output
// after the exit does not re-arm the clock, and the silence's trigger
// starts no capture.
func TestHangAfterEndsWithTheMainChild(t *testing.T) {
	h := newHangRun(&env{stderr: io.Discard}, hangSettings{after: time.Hour}, hangPlan{}, nil, nil)
	h.start("sh")
	h.exited()
	h.output()
	assert.False(t, h.timer.Stop(), "the clock was re-armed after the main child exited")
	h.fire("no output from CMD", true)
	assert.Empty(t, h.trigger, "a capture started after the main child exited")
	h.end()
}

// TestFreeLoopback: the RAS address run gives a job is a loopback port
// that is free: a listener can take it.
func TestFreeLoopback(t *testing.T) {
	addr := freeLoopback()
	require.True(t, strings.HasPrefix(addr, "127.0.0.1:"), addr)
	ln, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	require.NoError(t, ln.Close())
}
