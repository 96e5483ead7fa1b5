package launcher

import (
	"os"

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
