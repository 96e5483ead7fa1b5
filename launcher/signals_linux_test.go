//go:build linux

package launcher

import (
	"bytes"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ncclrun/ncclrun/internal/testutil"
)

func init() {
	helpers["usr1-ready"] = func([]string) {
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGUSR1)
		fmt.Printf("ready %d\n", os.Getpid())
		awaitUSR1(ch)
	}
	// usr1-parent: ask the supervisor, its parent, for a SIGUSR1 as soon
	// as it can take one, and wait for it.
	helpers["usr1-parent"] = func([]string) {
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGUSR1)
		must(unix.Kill(os.Getppid(), unix.SIGUSR1))
		awaitUSR1(ch)
	}
}

// awaitUSR1 says whether SIGUSR1 came on ch within a bound that only a
// lost signal reaches.
func awaitUSR1(ch <-chan os.Signal) {
	select {
	case <-ch:
		os.Stdout.WriteString("got USR1\n")
	case <-time.After(10 * time.Second):
		os.Stdout.WriteString("no USR1\n")
		os.Exit(3)
	}
}

// signalOnReady collects what the relay writes and, on CMD's "ready" line,
// sends SIGUSR1 to this process, the supervisor, to be forwarded.
type signalOnReady struct {
	mu   sync.Mutex
	b    bytes.Buffer
	once sync.Once
}

func (w *signalOnReady) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	if strings.Contains(w.b.String(), "ready ") {
		w.once.Do(func() { _ = unix.Kill(os.Getpid(), unix.SIGUSR1) })
	}
	return len(p), nil
}

func (w *signalOnReady) String() string { w.mu.Lock(); defer w.mu.Unlock(); return w.b.String() }

// signalOnRead is a stdin that sends sig to this process, the supervisor,
// when it is first read: Run starts copying Config.Stdin into the child's
// stdin the moment the fork returned, before it relays or supervises
// anything.
type signalOnRead struct {
	sig  syscall.Signal
	once sync.Once
}

func (r *signalOnRead) Read([]byte) (int, error) {
	r.once.Do(func() { _ = unix.Kill(os.Getpid(), r.sig) })
	return 0, nil // never an end: the child may keep its stdin
}

// Every forwarded signal that ncclrun did not inherit as ignored, and
// SIGCHLD, are caught once CatchSignals is through: nothing is left to
// enable after CMD starts.
func TestSignalsCaughtInOneStep(t *testing.T) {
	waitSignals()
	cgt := statusMask("/proc/self/status", "SigCgt")
	for _, s := range append(notifiable(forwarded), unix.SIGCHLD) {
		sig := s.(syscall.Signal)
		assert.NotZero(t, cgt&(1<<(sig-1)), "%s is not caught (SigCgt %x)", unix.SignalName(sig), cgt)
	}
}

// A signal sent to ncclrun the instant CMD is started reaches CMD: as
// soon as its pid exists (before CMD could set a handler: the default
// action kills it), as soon as CMD itself can ask for one, and in answer
// to CMD's first line.
func TestRunForwardsASignalSentTheInstantCMDStarts(t *testing.T) {
	sleep := testutil.RequireTool(t, "sleep")
	t.Run("pid known", func(t *testing.T) {
		res, err := Run(Config{Path: sleep, Args: []string{"20"}, Stdin: &signalOnRead{sig: unix.SIGUSR1},
			Stdout: os.Stdout, Stderr: os.Stderr})
		require.NoError(t, err)
		assert.Equal(t, Result{ExitCode: 128 + int(unix.SIGUSR1), Signal: unix.SIGUSR1}, res)
	})
	t.Run("CMD ready", func(t *testing.T) {
		var out bytes.Buffer
		cfg := helperConfig(t, "usr1-parent")
		cfg.Stdout = &out
		res, err := Run(cfg)
		require.NoError(t, err)
		assert.Equal(t, Result{}, res)
		assert.Equal(t, "got USR1\n", out.String())
	})
	t.Run("first line", func(t *testing.T) {
		out := &signalOnReady{}
		cfg := helperConfig(t, "usr1-ready")
		cfg.Stdout = out
		res, err := Run(cfg)
		require.NoError(t, err)
		assert.Equal(t, Result{}, res)
		assert.Regexp(t, `^ready \d+\ngot USR1\n$`, out.String())
	})
}
