//go:build linux

package launcher

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func init() {
	helpers["raise"] = func(a []string) {
		// Nothing is caught here: the signal meets the Go runtime's own
		// handling, as a late signal does before CatchSignals enabled it.
		runtime.LockOSThread()
		for _, s := range a {
			sig := syscall.Signal(atoi(s))
			// To this thread, so it is handled before tgkill returns.
			must(unix.Tgkill(os.Getpid(), unix.Gettid(), sig))
		}
		os.Stdout.WriteString("alive\n")
	}
	helpers["usr1-ready"] = func([]string) {
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGUSR1)
		fmt.Printf("ready %d\n", os.Getpid())
		select {
		case <-ch:
			os.Stdout.WriteString("got USR1\n")
		case <-time.After(3 * time.Second):
			os.Stdout.WriteString("no USR1\n")
			os.Exit(3)
		}
	}
	helpers["gated-run"] = func(a []string) {
		// The late signals are enabled only once the relay had ample time
		// to pass on CMD's first line, if it did not wait for them.
		seen := make(chan struct{})
		caught.between = func() {
			select {
			case <-seen:
			case <-time.After(300 * time.Millisecond):
			}
		}
		self, _ := os.Executable()
		out := &signalOnReady{seen: seen}
		res, err := Run(Config{
			Path: self, Env: append(os.Environ(), helperEnv+"=usr1-ready"),
			Stdout: out, Stderr: os.Stderr,
		})
		must(err)
		out.mu.Lock()
		os.Stdout.Write(out.b.Bytes())
		out.mu.Unlock()
		os.Exit(res.ExitCode)
	}
	helpers["gated-exit"] = func(a []string) {
		// SIGCHLD is enabled only after CMD has started and exited (waitid
		// without reaping it): Run must still see the exit.
		caught.between = func() {
			var info unix.Siginfo
			for {
				err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOWAIT, nil)
				switch {
				case errors.Is(err, unix.ECHILD):
					runtime.Gosched() // CMD is not started yet
				case !errors.Is(err, unix.EINTR):
					return
				}
			}
		}
		res, err := Run(Config{Path: "sh", Args: []string{"-c", "exit 7"}, Stdout: os.Stdout, Stderr: os.Stderr})
		must(err)
		fmt.Printf("exit %d\n", res.ExitCode)
	}
}

// signalOnReady collects what the relay writes and, on CMD's "ready" line,
// sends SIGUSR1 to this process, the supervisor, to be forwarded.
type signalOnReady struct {
	mu   sync.Mutex
	b    bytes.Buffer
	seen chan struct{}
	once sync.Once
}

func (w *signalOnReady) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	if strings.Contains(w.b.String(), "ready ") {
		w.once.Do(func() {
			// To this thread, so that the runtime has handled (or
			// dropped) it before between is let go.
			runtime.LockOSThread()
			_ = unix.Tgkill(os.Getpid(), unix.Gettid(), unix.SIGUSR1)
			runtime.UnlockOSThread()
			close(w.seen)
		})
	}
	return len(p), nil
}

// The premise of enabling most signals late (caught): left to the Go
// runtime, each forwarded signal but the terminating ones, SIGSTKFLT and
// the terminal stop signals is dropped, and so is SIGCHLD. The terminating
// ones and SIGSTKFLT show that the helper would see harm.
func TestLateSignalsHarmless(t *testing.T) {
	type tc struct {
		name string
		sigs []syscall.Signal
		dies bool
	}
	var late []syscall.Signal
	for _, s := range forwarded {
		switch sig := s.(syscall.Signal); sig {
		case unix.SIGSTKFLT, unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU:
		default:
			if !terminating(sig) {
				late = append(late, sig)
			}
		}
	}
	late = append(late, unix.SIGCHLD)
	tests := []tc{{name: "late", sigs: late}}
	for _, sig := range []syscall.Signal{unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGQUIT, unix.SIGSTKFLT} {
		tests = append(tests, tc{name: unix.SignalName(sig), sigs: []syscall.Signal{sig}, dies: true})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var args []string
			for _, s := range tt.sigs {
				args = append(args, strconv.Itoa(int(s)))
			}
			c := helperRun(t, 10*time.Second, "raise", args...)
			c.Env = append(c.Env, "GOTRACEBACK=none")
			var out bytes.Buffer
			c.Stdout = &out
			err := c.Run()
			if tt.dies {
				assert.Error(t, err, "the Go runtime survived %v", tt.sigs)
				assert.Empty(t, out.String())
				return
			}
			require.NoError(t, err, "a signal enabled late would end ncclrun before it is: %v", tt.sigs)
			assert.Equal(t, "alive\n", out.String())
		})
	}
}

// A signal sent to the supervisor in answer to CMD's first line is
// forwarded, however late the signals other than the terminating ones are
// enabled: the relay passes nothing on before they are.
func TestRunRelaysAfterEverySignalIsCaught(t *testing.T) {
	out, err := helperRun(t, 20*time.Second, "gated-run").Output()
	require.NoError(t, err, "CMD did not get the forwarded SIGUSR1: %s", out)
	assert.Regexp(t, `^ready \d+\ngot USR1\n$`, string(out))
}

// CMD's exit before SIGCHLD is caught is not missed.
func TestRunReapsAnExitBeforeSIGCHLDIsCaught(t *testing.T) {
	out, err := helperRun(t, 20*time.Second, "gated-exit").Output()
	require.NoError(t, err, "%s", out)
	assert.Equal(t, "exit 7\n", string(out))
}

// Job control is caught before CMD starts; of the late signals, the user
// signals are enabled first.
func TestLateSignalsOrder(t *testing.T) {
	for _, s := range []os.Signal{unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU, unix.SIGCONT} {
		assert.True(t, jobControl(s), "%v", s)
	}
	for _, tc := range []struct {
		sig  os.Signal
		rank int
	}{
		{unix.SIGUSR1, 0}, {unix.SIGUSR2, 0},
		{unix.SIGWINCH, 1}, {unix.SIGALRM, 1}, {unix.SIGPWR, 1}, {unix.SIGSTKFLT, 1},
	} {
		assert.False(t, jobControl(tc.sig), "%v", tc.sig)
		assert.Equal(t, tc.rank, lateRank(tc.sig), "%v", tc.sig)
	}
}
