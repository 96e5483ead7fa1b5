//go:build linux

package launcher

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
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
	// instant: Run a CMD that gets SIGUSR1 the instant it starts (a[0]:
	// "pid", "ready" or "line"; see
	// TestRunForwardsASignalSentTheInstantCMDStarts) and say how it ended.
	helpers["instant"] = func(a []string) {
		self, _ := os.Executable()
		out := &signalOnReady{} // signals only on a "ready" line
		cfg := Config{Path: self, Stdout: out, Stderr: os.Stderr}
		switch a[0] {
		case "pid":
			cfg.Path, cfg.Args, cfg.Stdin = "sleep", []string{"20"}, &signalOnRead{sig: unix.SIGUSR1}
		case "ready":
			cfg.Env = append(os.Environ(), helperEnv+"=usr1-parent")
		case "line":
			cfg.Env = append(os.Environ(), helperEnv+"=usr1-ready")
		}
		res, err := Run(cfg)
		must(err)
		fmt.Printf("%sexit %d signal %d\n", out.String(), res.ExitCode, int(res.Signal))
	}
	// raise-all: raise every signal Run catches the moment it could fork,
	// and say whether each one arrived.
	helpers["raise-all"] = func([]string) {
		waitSignals()
		want := map[os.Signal]bool{}
		runtime.LockOSThread()
		for _, s := range append(notifiable(forwarded), unix.SIGCHLD) {
			want[s] = true
			// To this thread, so it is handled before tgkill returns.
			must(unix.Tgkill(os.Getpid(), unix.Gettid(), s.(syscall.Signal)))
		}
		timeout := time.After(10 * time.Second)
		for len(want) > 0 {
			select {
			case s := <-caught.term:
				delete(want, s)
			case s := <-caught.ch:
				delete(want, s)
			case <-caught.chld:
				delete(want, unix.SIGCHLD)
			case <-timeout:
				fmt.Printf("missing %v\n", want)
				return
			}
		}
		fmt.Println("all arrived")
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
	return 0, io.EOF
}

// Every forwarded signal that ncclrun did not inherit as ignored, and
// SIGCHLD, are caught once the set-up Run waits for before the fork is
// through: each one raised at that moment arrives (the Go runtime drops
// one it does not catch). In a helper process of its own, so that nothing
// caught them before.
func TestSignalsCaughtInOneStep(t *testing.T) {
	out, err := helperRun(t, 30*time.Second, "raise-all").Output()
	require.NoError(t, err, "%s", out)
	assert.Equal(t, "all arrived\n", string(out))
}

// A signal sent to ncclrun the instant CMD is started reaches CMD: as
// soon as its pid exists (before CMD could set a handler: the default
// action kills it), as soon as CMD itself can ask for one, and in answer
// to CMD's first line. Each case runs in a helper process of its own, so
// that its Run is the first of the process and catches the signals itself.
func TestRunForwardsASignalSentTheInstantCMDStarts(t *testing.T) {
	testutil.RequireTool(t, "sleep")
	for _, tc := range []struct{ name, want string }{
		{"pid", "exit 138 signal 10\n"},
		{"ready", "got USR1\nexit 0 signal 0\n"},
		{"line", `^ready \d+\ngot USR1\nexit 0 signal 0\n$`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := helperRun(t, 30*time.Second, "instant", tc.name).Output()
			require.NoError(t, err, "%s", out)
			assert.Regexp(t, tc.want, string(out))
		})
	}
}
