package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/ncclrun/ncclrun/diagnosis"
	"github.com/ncclrun/ncclrun/internal/cmdkind"
	"github.com/ncclrun/ncclrun/launcher"
)

// TestOnDegradedFail: on a node with usable RDMA ports (the ib-node tree)
// the fake NCCL falls back to sockets and then trains until stopped. With
// --on-degraded fail ncclrun stops it as SIGTERM would once
// degraded-transport is certain, within a second of saying so, and exits
// ExitDegraded; the report keeps CMD's status (killed by SIGTERM, which
// nothing but ncclrun sent) and the termination message gives the cause.
func TestOnDegradedFail(t *testing.T) {
	root, err := filepath.Abs("../../preflight/testdata/ib-node")
	require.NoError(t, err)
	dir := t.TempDir()
	rep, tl := filepath.Join(dir, "report.json"), filepath.Join(dir, "termination")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, bin, "--root", root, "--on-degraded", "fail", "--report", rep, "--termination-log", tl,
		"run", "--", bin, "fake-nccl", "--net", "socket", "--hold")
	c.Env = baseEnv(t)
	var out bytes.Buffer
	c.Stdout = &out
	errPipe, err := c.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, c.Start())
	var stderr []string
	var said time.Time // when ncclrun said it stops CMD
	sc := bufio.NewScanner(errPipe)
	for sc.Scan() {
		if strings.Contains(sc.Text(), "--on-degraded fail: stopping") && said.IsZero() {
			said = time.Now()
		}
		stderr = append(stderr, sc.Text())
	}
	err = c.Wait()
	ended := time.Now()
	require.NoError(t, ctx.Err(), "ncclrun did not stop CMD; stderr %q", stderr)
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "stderr %q", stderr)
	assert.Equal(t, ExitDegraded, ee.ExitCode(), "stderr %q", stderr)
	require.False(t, said.IsZero(), "ncclrun says it stops CMD: %q", stderr)
	assert.Less(t, ended.Sub(said), time.Second, "CMD ended within a second of the certainty")

	var r runReport
	b, err := os.ReadFile(rep)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &r))
	assert.Equal(t, 128+int(unix.SIGTERM), r.ExitCode, "CMD ended of the SIGTERM ncclrun sent; the report keeps its status")
	require.NotEmpty(t, r.Diagnoses)
	assert.Equal(t, diagnosis.Degraded, r.Diagnoses[0].ID)
	assert.Equal(t, diagnosis.Certain, r.Diagnoses[0].Certainty)
	msg, err := os.ReadFile(tl)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(msg), "ncclrun: --on-degraded fail: CMD was stopped"), "%s", msg)
	assert.Contains(t, string(msg), "(degraded-transport", "the diagnosis is the termination message")
	assert.LessOrEqual(t, len(msg), terminationLimit)
}

// TestOnDegradedDefaults: what --on-degraded fail does not stop: the
// default (warn) only says so, a node without usable ports makes no
// certainty, and a job on InfiniBand is healthy.
func TestOnDegradedDefaults(t *testing.T) {
	tests := []struct {
		name  string
		tree  string
		flags []string
		net   string
		diag  bool
	}{
		{"warn is the default", "ib-node", nil, "socket", true},
		{"warn", "ib-node", []string{"--on-degraded", "warn"}, "socket", true},
		{"no RDMA port", "docker-root", []string{"--on-degraded", "fail"}, "socket", false},
		{"on InfiniBand", "ib-node", []string{"--on-degraded", "fail"}, "ib", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root, err := filepath.Abs("../../preflight/testdata/" + tc.tree)
			require.NoError(t, err)
			args := append(append([]string{"--root", root}, tc.flags...), "run", "--", bin, "fake-nccl", "--net", tc.net)
			r := invocation{args: args}.run(t)
			assert.Equal(t, 0, r.code, "CMD's own status; stderr %q", r.stderr)
			assert.Equal(t, tc.diag, strings.Contains(r.stderr, "(degraded-transport") || strings.Contains(r.stderr, "degraded-transport:"), "stderr %q", r.stderr)
			assert.NotContains(t, r.stderr, "CMD was stopped")
		})
	}
}

// TestVerdict: ncclrun's status from CMD's and what the policy saw.
func TestVerdict(t *testing.T) {
	degraded := diagnosis.Diagnosis{ID: diagnosis.Degraded, Certainty: diagnosis.Certain}
	memlock := diagnosis.Diagnosis{ID: "memlock", Certainty: diagnosis.Certain}
	likelyShm := diagnosis.Diagnosis{ID: "shm", Certainty: diagnosis.Likely}
	ib := diagnosis.Diagnosis{ID: "ib-transport", Certainty: diagnosis.Certain}
	tests := []struct {
		name    string
		f       failFast
		stopped bool
		code    int
		ds      []diagnosis.Diagnosis
		want    int
	}{
		{"stopped", failFast{onDegradedFail: true}, true, 143, []diagnosis.Diagnosis{degraded}, ExitDegraded},
		{"stopped, torchrun's status", failFast{onDegradedFail: true}, true, 1, []diagnosis.Diagnosis{degraded}, ExitDegraded},
		{"succeeded before the stop reached it", failFast{onDegradedFail: true}, true, 0, []diagnosis.Diagnosis{degraded}, 0},
		{"misconfiguration", failFast{misconfigExit: 90}, false, 1, []diagnosis.Diagnosis{memlock}, 90},
		{"misconfiguration after a retryable cause", failFast{misconfigExit: 90}, false, 1, []diagnosis.Diagnosis{ib, memlock}, 90},
		{"misconfiguration, off", failFast{}, false, 1, []diagnosis.Diagnosis{memlock}, 1},
		{"a likely one is not enough", failFast{misconfigExit: 90}, false, 1, []diagnosis.Diagnosis{likelyShm}, 1},
		{"retryable", failFast{misconfigExit: 90}, false, 134, []diagnosis.Diagnosis{ib}, 134},
		{"CMD succeeded", failFast{misconfigExit: 90}, false, 0, []diagnosis.Diagnosis{memlock}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newFailRun(tc.f)
			if tc.stopped {
				require.NotEmpty(t, r.found(degraded, "CMD"))
				assert.Empty(t, r.found(degraded, "CMD"), "said once")
			}
			got, note := r.verdict(launcher.Result{ExitCode: tc.code}, tc.ds)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, got != tc.code, note != "", "a note when the status changed: %q", note)
		})
	}
}

// retryableScript fails as an InfiniBand link error does: certain, and
// a retry may well not meet it again.
const retryableScript = `echo "host:1:2 [0] transport/net_ib.cc:1001 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<1234> with error 12, opcode 1, len 0, vendor err 129 (Recv) localGid ::ffff:10.0.0.1 remoteGids ::ffff:10.0.0.2"
exit 1
`

// TestMisconfigExit: --misconfig-exit N replaces CMD's failing status when a
// certain misconfiguration (memlock here: RLIMIT_MEMLOCK 64 KiB without
// CAP_IPC_LOCK) was diagnosed, and the report and the termination message
// keep CMD's; a retryable cause, a success or no flag keep CMD's status.
func TestMisconfigExit(t *testing.T) {
	fakePath := fakeCommands(t, map[string]string{"ibfail": retryableScript})
	memlockJob := []string{"--memlock", "64KiB", "--drop-cap", "IPC_LOCK"}
	tests := []struct {
		name  string
		flags []string
		cmd   []string
		code  int // ncclrun's status
		cmdSt int // CMD's, in the report
		id    string
	}{
		{"memlock", append([]string{"--misconfig-exit", "90"}, memlockJob...), []string{bin, "fake-nccl", "--pin", "16MiB"}, 90, 1, "memlock"},
		{"memlock, off by default", memlockJob, []string{bin, "fake-nccl", "--pin", "16MiB"}, 1, 1, "memlock"},
		{"retryable cause", []string{"--misconfig-exit", "90"}, []string{"ibfail"}, 1, 1, "ib-transport"},
		{"success", []string{"--misconfig-exit", "90"}, []string{bin, "fake-nccl", "--pin", "0"}, 0, 0, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			rep, tl := filepath.Join(dir, "report.json"), filepath.Join(dir, "termination")
			args := append(append([]string{"--report", rep, "--termination-log", tl}, tc.flags...), append([]string{"run", "--"}, tc.cmd...)...)
			r := invocation{args: args, env: []string{fakePath}}.run(t)
			require.Equal(t, tc.code, r.code, "stderr %q", r.stderr)
			var rr runReport
			b, err := os.ReadFile(rep)
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal(b, &rr))
			assert.Equal(t, tc.cmdSt, rr.ExitCode, "the report keeps CMD's status")
			if tc.id == "" {
				assert.Empty(t, rr.Diagnoses)
				return
			}
			require.NotEmpty(t, rr.Diagnoses)
			assert.Equal(t, tc.id, rr.Diagnoses[0].ID)
			msg, err := os.ReadFile(tl)
			require.NoError(t, err)
			assert.Contains(t, string(msg), "("+tc.id)
			if tc.code != tc.cmdSt {
				want := "ncclrun: --misconfig-exit: CMD failed (exit status 1) and memlock is certain"
				assert.True(t, strings.HasPrefix(string(msg), want), "%s", msg)
				assert.Contains(t, r.stderr, want)
			} else {
				assert.NotContains(t, string(msg)+r.stderr, "--misconfig-exit")
			}
		})
	}
}

// TestFailFastFlags: the flags' parsing, their variables, and usage errors.
func TestFailFastFlags(t *testing.T) {
	tests := []struct {
		args []string
		env  []string
		want failFast
		bad  string
	}{
		{want: failFast{}},
		{args: []string{"--on-degraded", "fail"}, want: failFast{onDegradedFail: true}},
		{env: []string{"NCCLRUN_ON_DEGRADED=FAIL"}, want: failFast{onDegradedFail: true}},
		{args: []string{"--stop-grace", "90s"}, want: failFast{stopGrace: 90 * time.Second, checkpointSig: unix.SIGUSR1}},
		{env: []string{"NCCLRUN_STOP_GRACE=1m", "NCCLRUN_CHECKPOINT_SIGNAL=USR2"}, want: failFast{stopGrace: time.Minute, checkpointSig: unix.SIGUSR2}},
		{args: []string{"--stop-grace", "1s", "--checkpoint-signal", "12"}, want: failFast{stopGrace: time.Second, checkpointSig: unix.SIGUSR2}},
		{args: []string{"--misconfig-exit", "90"}, want: failFast{misconfigExit: 90}},
		{env: []string{"NCCLRUN_MISCONFIG_EXIT=42"}, want: failFast{misconfigExit: 42}},
		{args: []string{"--on-degraded", "stop"}, bad: "--on-degraded"},
		{args: []string{"--stop-grace", "-1s"}, bad: "--stop-grace"},
		{args: []string{"--checkpoint-signal", "USR1"}, bad: "needs --stop-grace"},
		{args: []string{"--stop-grace", "1s", "--checkpoint-signal", "SIGKILL"}, bad: "cannot be caught"},
		{args: []string{"--stop-grace", "1s", "--checkpoint-signal", "USR9"}, bad: "not a signal"},
		{args: []string{"--misconfig-exit", "256"}, bad: "--misconfig-exit"},
		{args: []string{"--misconfig-exit", "x"}, bad: "--misconfig-exit"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(append(tc.args, tc.env...), " "), func(t *testing.T) {
			for _, kv := range tc.env {
				k, v, _ := strings.Cut(kv, "=")
				t.Setenv(k, v)
			}
			var got failFast
			gotErr := parseWith(append([]string{"ncclrun"}, append(tc.args, "--", "true")...), func(s settings) { got = s.ff })
			if tc.bad != "" {
				var ue *usageError
				require.True(t, errors.As(gotErr, &ue), "want a usage error, got %v", gotErr)
				assert.Contains(t, gotErr.Error(), tc.bad)
				return
			}
			require.NoError(t, gotErr)
			assert.Equal(t, tc.want, got)
		})
	}
}

// parseWith parses args (ncclrun, then run's flags) with run's flags and
// hands f the settings.
func parseWith(args []string, f func(settings)) error {
	var perr error
	app := &cli.App{Writer: io.Discard, ErrWriter: io.Discard,
		ExitErrHandler: func(*cli.Context, error) {},
		Commands: []*cli.Command{{Name: "run", Flags: commandFlags("run"),
			OnUsageError: func(_ *cli.Context, err error, _ bool) error { return &usageError{err} },
			Action: func(c *cli.Context) error {
				s, err := parseSettings(c)
				if perr = err; err == nil {
					f(s)
				}
				return nil
			}}}}
	if err := app.Run(append([]string{args[0], "run"}, args[1:]...)); err != nil {
		return err
	}
	return perr
}

// TestCheckpointTargets: torchrun's workers get the checkpoint signal,
// any other CMD (mpirun included) itself; no --stop-grace, no step.
func TestCheckpointTargets(t *testing.T) {
	f := failFast{stopGrace: time.Minute, checkpointSig: unix.SIGUSR1}
	tests := []struct {
		path string
		args []string
		to   launcher.Checkpoint
	}{
		{"torchrun", []string{"train.py"}, launcher.CheckpointChildren},
		{"/usr/bin/python3", []string{"-m", "torch.distributed.run", "train.py"}, launcher.CheckpointChildren},
		{"mpirun", []string{"-np", "8", "python3", "train.py"}, launcher.CheckpointChild},
		{"python3", []string{"train.py"}, launcher.CheckpointChild},
	}
	for _, tc := range tests {
		var cfg launcher.Config
		f.configure(&cfg, cmdkind.Command{Path: tc.path, Args: tc.args}, io.Discard)
		assert.Equal(t, tc.to, cfg.CheckpointTo, tc.path)
		assert.Equal(t, syscall.Signal(unix.SIGUSR1), cfg.CheckpointSignal)
		assert.Equal(t, time.Minute, cfg.StopGrace)
	}
	var cfg launcher.Config
	failFast{}.configure(&cfg, cmdkind.Command{Path: "torchrun"}, io.Discard)
	assert.Equal(t, launcher.Config{}, cfg)
}
