package launcher

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// The KillAfter timer fires on time while the output is drained: a
// descendant that ignores SIGTERM and holds the pipes after the main
// child exited is killed KillAfter after the forwarded signal, not once
// the drain gives up on it.
func TestRunKillAfterFiresDuringTheDrain(t *testing.T) {
	defer func(d time.Duration) { drainTimeout = d }(drainTimeout)
	drainTimeout = time.Hour
	out := newWatchBuf()
	cfg := helperConfig(t, "leave") // its worker holds the stdout pipe
	cfg.Stdout = out
	cfg.KillAfter = 2 * time.Second
	done := runAsync(cfg)
	s := out.waitFor("\n")
	worker, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(s, "worker ")))
	require.NoError(t, err, "helper said %q", s)
	require.NoError(t, unix.Kill(os.Getpid(), unix.SIGTERM))
	var r runResult
	select {
	case r = <-done:
	case <-time.After(30 * time.Second): // KillAfter is 2 s: the kill timer was not taken
		_ = unix.Kill(worker, unix.SIGKILL)
		<-done
		t.Fatal("Run waited for the drain, not for KillAfter")
	}
	require.NoError(t, r.err)
	assert.Equal(t, Result{ExitCode: 3}, r.res)
	assert.ErrorIs(t, unix.Kill(worker, 0), unix.ESRCH, "worker %d still exists", worker)
}

// OnExit is told that the main child exited while a descendant still
// holds its output: before the drain, not once it ends.
func TestRunOnExitBeforeTheDrain(t *testing.T) {
	defer func(d time.Duration) { drainTimeout = d }(drainTimeout)
	drainTimeout = time.Hour
	out := newWatchBuf()
	exited := make(chan struct{})
	calls := 0
	cfg := helperConfig(t, "leave") // its worker holds the stdout pipe
	cfg.Stdout = out
	cfg.OnExit = func() {
		if calls++; calls == 1 {
			close(exited)
		}
	}
	done := runAsync(cfg)
	s := out.waitFor("\n")
	worker, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(s, "worker ")))
	require.NoError(t, err, "helper said %q", s)
	require.NoError(t, unix.Kill(os.Getpid(), unix.SIGTERM)) // forwarded: the main child exits 3
	select {
	case <-exited:
	case <-time.After(30 * time.Second): // the worker holds the output until it is killed
		t.Error("OnExit waited for the drain")
	}
	require.NoError(t, unix.Kill(worker, unix.SIGKILL))
	r := <-done
	require.NoError(t, r.err)
	assert.Equal(t, 3, r.res.ExitCode)
	assert.Equal(t, 1, calls, "OnExit is called once")
}
