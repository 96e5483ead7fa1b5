package launcher

import (
	"os"
	"os/signal"
	"sort"
	"sync"

	"golang.org/x/sys/unix"
)

// forwarded are the signals ncclrun catches and forwards to the child.
// Not here: SIGKILL and SIGSTOP (cannot be caught), SIGCHLD (it means
// "reap"), SIGURG (the Go runtime's preemption signal, forwarding it makes
// mpirun print "Forwarding signal 23"), SIGPROF (Go's profiler), the
// synchronous signals tini leaves alone (SEGV, BUS, FPE, ILL, TRAP, ABRT,
// SYS) and the real-time signals. SIGPIPE is caught so that a closed
// output fails a write instead of killing ncclrun, and is not forwarded.
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
// never undone: every enable or disable of a signal is a round trip to the
// Go runtime's signal-mask thread (two thread hand-offs, 15-50 us each on
// a 2-core VM), and 20 enables plus as many disables on the way out were
// ~1.4 ms of every start. Signals that arrive when no Run is supervising
// wait in the channels and are not acted on, so they do not kill ncclrun:
// the terminating ones are for cmd/ncclrun to see (Terminating), Run drops
// the others before it starts CMD. A signal that was ignored when ncclrun
// started is not caught (notifiable): it stays ignored, for ncclrun and
// for CMD.
//
// The signals are enabled in two steps (docs/performance.md). First the
// terminating ones (SIGTERM, SIGINT, SIGHUP, SIGQUIT), which would kill
// ncclrun while not caught and which, during preflight, mean "do not
// start", and job control (jobControl): Run starts CMD only once they are
// (ready). Then SIGCHLD and the
// others, while CMD starts (all). Until then the Go runtime drops SIGCHLD
// and most of them (TestLateSignalsHarmless), so Run reaps once more when
// they are enabled, and the relays pass on nothing of CMD's output before
// that: whoever signals CMD in answer to what it printed has the signal
// forwarded. The exception is SIGSTKFLT, which would crash ncclrun in that
// window (nothing sends it).
var caught struct {
	once  sync.Once
	ready chan struct{}  // closed when the terminating and job-control signals are enabled
	all   chan struct{}  // closed when every signal is enabled, SIGCHLD included
	term  chan os.Signal // SIGTERM, SIGINT, SIGHUP, SIGQUIT
	ch    chan os.Signal // the other forwarded signals
	chld  chan os.Signal // SIGCHLD apart, so a flood of others cannot crowd it out
	// between, when set (tests), runs after ready is closed and before
	// the other signals are enabled.
	between func()
}

// CatchSignals starts catching, until ncclrun exits, the signals Run
// forwards and SIGCHLD. It returns at once: the signals are enabled on a
// goroutine, overlapping whatever the caller does next (parsing flags,
// preflight), and Run and Terminating wait until the terminating ones are. Call
// it first thing in a command that will call Run; Run calls it too.
// Calling it again does nothing.
func CatchSignals() {
	caught.once.Do(func() {
		caught.ready = make(chan struct{})
		caught.all = make(chan struct{})
		caught.term = make(chan os.Signal, 16)
		caught.ch = make(chan os.Signal, 128)
		caught.chld = make(chan os.Signal, 1)
		between := caught.between
		go func() {
			defer close(caught.all)
			var term, other []os.Signal
			var control []os.Signal
			for _, s := range notifiable(forwarded) {
				switch {
				case terminating(s.(unix.Signal)):
					term = append(term, s)
				case jobControl(s):
					control = append(control, s)
				default:
					other = append(other, s)
				}
			}
			notify(caught.term, term)
			notify(caught.ch, control)
			close(caught.ready)
			if between != nil {
				between()
			}
			signal.Notify(caught.chld, unix.SIGCHLD)
			// The user signals first: the window in which they are not
			// caught yet is the shortest for them.
			sort.SliceStable(other, func(i, j int) bool { return lateRank(other[i]) < lateRank(other[j]) })
			notify(caught.ch, other)
		}()
	})
}

// jobControl reports whether s is a terminal stop signal or SIGCONT.
// They are caught before CMD starts too: one that came after the fork and
// before it was caught would stop ncclrun and not CMD, and whoever sends
// ^Z may have learnt CMD's pid some other way than from its output (CI
// found TestFaultJobControlOnTerminal hung so under load).
func jobControl(s os.Signal) bool {
	switch s {
	case unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU, unix.SIGCONT:
		return true
	}
	return false
}

// lateRank orders the signals enabled after CMD started: SIGUSR1 and
// SIGUSR2 (what a job is most often sent) first, then the others.
func lateRank(s os.Signal) int {
	switch s {
	case unix.SIGUSR1, unix.SIGUSR2:
		return 0
	}
	return 1
}

// notify is signal.Notify of sigs, which given none would catch every
// signal.
func notify(c chan<- os.Signal, sigs []os.Signal) {
	if len(sigs) > 0 {
		signal.Notify(c, sigs...)
	}
}

// waitSignals is CatchSignals that returns once the terminating signals
// are enabled.
func waitSignals() {
	CatchSignals()
	<-caught.ready
}

// Terminating returns the channel of the terminating signals (SIGTERM,
// SIGINT, SIGHUP, SIGQUIT) caught since CatchSignals, once they are
// enabled. While Run supervises a child it reads them itself (and
// forwards them); before and after, they are the caller's to read: one
// before the start means "do not start", one after the exit must not
// change CMD's status.
func Terminating() <-chan os.Signal {
	waitSignals()
	return caught.term
}
