//go:build linux

package launcher

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ncclrun/ncclrun/internal/testutil"
)

func init() {
	// sigign: print this process's SigIgn mask, then wait for stdin to close.
	helpers["sigign"] = func([]string) {
		fmt.Printf("%x\n", statusMask("/proc/self/status", "SigIgn"))
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Stdout.WriteString("bye\n")
	}
	// escalate: a torchrun-like parent. Its worker (own session) ignores
	// SIGTERM; on SIGTERM the parent forwards it, waits a[0] milliseconds
	// for the worker (torchrun waits 30 s), SIGKILLs it and exits 1.
	helpers["escalate"] = func(a []string) {
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGTERM)
		w := startWorker()
		os.Stdout.WriteString("ready\n")
		<-ch
		_ = w.Process.Signal(syscall.SIGTERM)
		<-time.After(time.Duration(atoi(a[0])) * time.Millisecond) // the escalation's own timeout, not a synchronisation
		_ = w.Process.Kill()
		_ = w.Wait()
		os.Stdout.WriteString("escalated\n")
		os.Exit(1)
	}
	// leave: on SIGTERM exit 3, leaving a worker that ignores SIGTERM.
	helpers["leave"] = func([]string) {
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGTERM)
		w := startWorker()
		fmt.Printf("worker %d\n", w.Process.Pid)
		<-ch
		os.Exit(3)
	}
}

// startWorker starts the "worker" helper (ignores SIGTERM, a session of
// its own) and returns once it is ready.
func startWorker() *exec.Cmd {
	r, w, err := os.Pipe()
	must(err)
	c := helperCmd("worker")
	c.ExtraFiles = []*os.File{w}
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	must(c.Start())
	w.Close()
	_, err = io.ReadFull(r, make([]byte, 1))
	must(err)
	return c
}

// statusMask reads a hex mask line (SigIgn, SigCgt, CapEff ...) of a
// /proc/PID/status file; 0 when it is missing.
func statusMask(path, key string) uint64 {
	b, _ := os.ReadFile(path)
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && k == key {
			n, _ := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return n
		}
	}
	return 0
}

// A signal ignored when ncclrun starts (nohup: SIGHUP) stays ignored for
// CMD, and ncclrun neither catches nor forwards it. So do the job-control
// signals, which the Go runtime leaves as inherited and signal.Ignored
// does not report. Every signal is caught before CMD starts, so the
// supervisor's SigCgt is final when CMD's line is read.
func TestRunKeepsIgnoredSignalsIgnored(t *testing.T) {
	sh := testutil.RequireTool(t, "sh")
	self, err := os.Executable()
	require.NoError(t, err)
	for _, tc := range []struct {
		trap string
		sig  unix.Signal
	}{{"HUP", unix.SIGHUP}, {"TSTP", unix.SIGTSTP}, {"TTOU", unix.SIGTTOU}} {
		t.Run(tc.trap, func(t *testing.T) {
			spec, _ := json.Marshal(launchSpec{Path: self, Helper: "sigign"})
			c := exec.Command(sh, "-c", `trap '' `+tc.trap+`; exec "$0"`, self)
			c.Env = append(os.Environ(), helperEnv+"=launch", "NCCLRUN_TEST_LAUNCH="+string(spec))
			stdin, err := c.StdinPipe()
			require.NoError(t, err)
			stdout, err := c.StdoutPipe()
			require.NoError(t, err)
			require.NoError(t, c.Start())
			t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
			out := bufio.NewReader(stdout)
			line, err := out.ReadString('\n')
			require.NoError(t, err)
			childIgn, err := strconv.ParseUint(strings.TrimSpace(line), 16, 64)
			require.NoError(t, err, "child said %q", line)
			bit := uint64(1) << (tc.sig - 1)
			assert.NotZero(t, childIgn&bit, "SIG%s is not ignored in CMD (SigIgn %x)", tc.trap, childIgn)

			status := fmt.Sprintf("/proc/%d/status", c.Process.Pid)
			assert.NotZero(t, statusMask(status, "SigIgn")&bit, "the supervisor stopped ignoring SIG%s", tc.trap)
			require.Zero(t, statusMask(status, "SigCgt")&bit, "the supervisor catches SIG%s (and would forward it)", tc.trap)
			require.NoError(t, c.Process.Signal(tc.sig))
			require.NoError(t, stdin.Close())
			rest, _ := io.ReadAll(out)
			require.NoError(t, c.Wait(), "the supervisor or CMD died of SIG%s", tc.trap)
			assert.Equal(t, "bye\n", string(rest))
		})
	}
}

// By default (KillAfter 0) the main child is left its
// own shutdown: a torchrun-like parent escalating SIGTERM -> SIGKILL to a
// worker that ignores SIGTERM is not killed mid-way, and exits as it would
// without ncclrun.
func TestRunDefaultLeavesShutdownToTheCommand(t *testing.T) {
	defer func(d time.Duration) { leftoverGrace = d }(leftoverGrace)
	leftoverGrace = 50 * time.Millisecond // far below the helper's escalation: must not matter while it runs
	out := newWatchBuf()
	cfg := helperConfig(t, "escalate", "600")
	cfg.Stdout = out
	done := runAsync(cfg)
	out.waitFor("ready\n")
	require.NoError(t, unix.Kill(os.Getpid(), unix.SIGTERM))
	r := <-done
	require.NoError(t, r.err)
	assert.Equal(t, Result{ExitCode: 1}, r.res)
	assert.Equal(t, "ready\nescalated\n", out.String())
}

// By default, descendants a main child leaves behind
// when it exits on a terminating signal get DefaultKillAfter from its exit,
// then SIGKILL; the exit status stays the main child's.
func TestRunDefaultKillsLeftoversAfterTheExit(t *testing.T) {
	defer func(d time.Duration) { leftoverGrace = d }(leftoverGrace)
	leftoverGrace = 100 * time.Millisecond
	out := newWatchBuf()
	cfg := helperConfig(t, "leave")
	cfg.Stdout = out
	done := runAsync(cfg)
	s := out.waitFor("\n")
	worker, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(s, "worker ")))
	require.NoError(t, err, "helper said %q", s)
	require.NoError(t, unix.Kill(os.Getpid(), unix.SIGTERM))
	r := <-done
	require.NoError(t, r.err)
	assert.Equal(t, Result{ExitCode: 3}, r.res)
	assert.ErrorIs(t, unix.Kill(worker, 0), unix.ESRCH, "worker %d still exists", worker)
	ds, err := descendants("/proc", os.Getpid())
	require.NoError(t, err)
	assert.Empty(t, ds)
}

// A forged trampoline invocation without a command
// or argv is one line and exit 126, never a panic.
func TestTrampolineRejectsSpecWithoutCommand(t *testing.T) {
	self, err := os.Executable()
	require.NoError(t, err)
	for _, spec := range []string{`{"path":"/nonexistent/x"}`, `{"path":"/nonexistent/x","argv":[]}`, `{"argv":["sh"]}`, `{}`, `null`} {
		c := exec.Command(self)
		c.Env = append(os.Environ(), trampolineEnv+"="+spec)
		out, err := c.CombinedOutput()
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, "spec %s: output %q", spec, out)
		assert.Equal(t, 126, ee.ExitCode(), "spec %s: output %q", spec, out)
		assert.NotContains(t, string(out), "panic", "spec %s", spec)
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		assert.Len(t, lines, 1, "spec %s: output %q", spec, out)
		assert.True(t, strings.HasPrefix(string(out), "ncclrun: "), "spec %s: output %q", spec, out)
	}
}
