package launcher

import (
	"os"
	"os/signal"
	"sync"

	"golang.org/x/sys/unix"
)

// forwarded are the signals ncclrun catches and forwards to the child.
// Not here: SIGKILL and SIGSTOP (cannot be caught), SIGCHLD (it means
// "reap"), SIGURG (the Go runtime's preemption signal, forwarding it makes
// mpirun print "Forwarding signal 23"), SIGPROF (Go's profiler), the
// synchronous signals tini leaves alone (SEGV, BUS, FPE, ILL, TRAP, ABRT,
// SYS) and the real-time signals. SIGPIPE is caught and not forwarded:
// the kernel sends it to the writer of a closed pipe, ncclrun's business,
// not CMD's; caught, it also keeps a relay that writes to descriptor 1 or
// 2 itself (a Config without Stdout or Stderr) from dying of it.
var forwarded = []os.Signal{
	unix.SIGHUP, unix.SIGINT, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2,
	unix.SIGPIPE, unix.SIGALRM, unix.SIGTERM, unix.SIGSTKFLT, unix.SIGCONT,
	unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU, unix.SIGXCPU, unix.SIGXFSZ,
	unix.SIGVTALRM, unix.SIGWINCH, unix.SIGIO, unix.SIGPWR,
}

// terminating are the signals after which the KillAfter timer starts.
func terminating(s unix.Signal) bool {
	switch s {
	case unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGQUIT:
		return true
	}
	return false
}

// caught is ncclrun's one signal set-up, made once by CatchSignals and
// never undone: one signal.Notify of every forwarded signal and SIGCHLD,
// as runc does, done before CMD is forked. A signal ignored when ncclrun
// started is left out (notifiable): it stays ignored, for ncclrun and for
// CMD. The signals are sorted into three channels by one goroutine, so
// that SIGCHLD and the terminating signals are never crowded out by a
// flood of others. Signals that arrive when no Run is supervising wait in
// the channels and are not acted on, so they do not kill ncclrun: the
// terminating ones are for cmd/ncclrun to see (Terminating), Run drops
// the others before it starts CMD.
var caught struct {
	once  sync.Once
	ready chan struct{}  // closed once the signals are caught
	term  chan os.Signal // SIGTERM, SIGINT, SIGHUP, SIGQUIT
	ch    chan os.Signal // the other forwarded signals
	chld  chan struct{}  // SIGCHLD, several in a row as one: reap takes all
}

// CatchSignals starts catching, until ncclrun exits, the signals Run
// forwards and SIGCHLD. It returns at once: the signals are caught on a
// goroutine, which the Go scheduler runs when the caller first waits or a
// second CPU takes it, and Run and Terminating wait until they are. Call it first
// thing in a command that will call Run; Run calls it too. Calling it
// again does nothing.
func CatchSignals() {
	caught.once.Do(func() {
		caught.ready = make(chan struct{})
		caught.term = make(chan os.Signal, 16)
		caught.ch = make(chan os.Signal, 128)
		caught.chld = make(chan struct{}, 1)
		go func() {
			all := make(chan os.Signal, 256)
			signal.Notify(all, append(notifiable(forwarded), unix.SIGCHLD)...)
			close(caught.ready)
			for sig := range all {
				c := caught.ch
				switch {
				case sig == unix.SIGCHLD:
					select {
					case caught.chld <- struct{}{}:
					default:
					}
					continue
				case terminating(sig.(unix.Signal)):
					c = caught.term
				}
				select {
				case c <- sig:
				default: // full, as signal.Notify drops for a full channel
				}
			}
		}()
	})
}

// waitSignals is CatchSignals that returns once the signals are caught.
func waitSignals() {
	CatchSignals()
	<-caught.ready
}

// Terminating returns the channel of the terminating signals (SIGTERM,
// SIGINT, SIGHUP, SIGQUIT) caught since CatchSignals, once they are
// caught. While Run supervises a child it reads them itself (and
// forwards them); before and after, they are the caller's to read: one
// before the start means "do not start", one after the exit must not
// change CMD's status.
func Terminating() <-chan os.Signal {
	waitSignals()
	return caught.term
}
