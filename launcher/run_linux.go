package launcher

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// drainTimeout is how long output is still relayed after the main child
// exited, for descendants that hold the pipes ("about a second"); tests
// lengthen it.
var drainTimeout = time.Second

// reapTimeout bounds the wait for SIGKILLed descendants to disappear (a
// process in D state, stuck in a driver, cannot die).
const reapTimeout = 2 * time.Second

// Run starts the command of cfg as a supervised child and returns how it
// ended, once it has exited and its output has been relayed.
//
//   - The command is looked up in PATH (cfg.Env's, else ncclrun's); a
//     *StartError (ExitCode 127 or 126) is returned when it cannot be
//     found or executed. Config errors wrap ErrUser, ErrCapability or
//     ErrNoIPCLock; nothing is started then.
//   - The child runs in a session of its own. Its stdout and stderr are
//     relayed to cfg.Stdout and cfg.Stderr byte for byte as read(2)
//     returns them; when ncclrun's stream is a terminal (and not NoPTY)
//     the child gets a pseudo terminal for it instead of a pipe, with the
//     window size copied and SIGWINCH forwarded. A copy goes to cfg.Tap
//     through a bounded queue that sheds tap data, never relay data.
//   - Every forwarded signal (see forwarded) and SIGCHLD is caught before
//     the child is forked, so none sent once it exists is missed. Signals
//     are forwarded to the child, except those
//     ignored when ncclrun started, which stay ignored for the child too;
//     SIGTSTP, SIGTTIN and SIGTTOU stop the child's process group and then
//     ncclrun. After SIGTERM, SIGINT, SIGHUP or SIGQUIT, every descendant
//     still alive KillAfter later gets SIGKILL; with KillAfter 0 the main
//     child is left its own shutdown and what it leaves behind gets
//     DefaultKillAfter from its exit.
//   - Run owns waiting: it reaps every child of ncclrun (as PID 1, or as a
//     child subreaper, which it makes ncclrun) with wait4(-1) until it
//     returns. Nothing else in the process may wait for children meanwhile.
//   - When the main child has exited, output is relayed until the pipes
//     close or for at most drainTimeout. If a terminating signal was
//     forwarded, Run then waits for the remaining descendants until the
//     kill timer kills them; otherwise they get SIGTERM and Run returns.
//
// Run is not safe for concurrent use.
func Run(cfg Config) (Result, error) {
	l, err := plan(cfg)
	if err != nil {
		return Result{}, err
	}
	s := &supervisor{cfg: cfg, procRoot: "/proc", self: os.Getpid()}
	if s.cfg.Stdout == nil {
		s.cfg.Stdout = os.Stdout
	}
	if s.cfg.Stderr == nil {
		s.cfg.Stderr = os.Stderr
	}
	defer s.closeAll()
	return s.run(l)
}

type supervisor struct {
	cfg      Config
	procRoot string
	self     int
	pid      int // the main child

	termCh, sigCh <-chan os.Signal
	chldCh        <-chan struct{}
	toClose       []*os.File // ncclrun's copies of the child's ends, closed after the fork
	readers       []*os.File // what the relays read
	ptys          []*ptyPair
	stdinW        *os.File

	phase     phase
	status    *syscall.WaitStatus
	shutdown  bool // a terminating signal was forwarded
	killTimer *time.Timer
	killC     <-chan time.Time
	killed    bool // the tree was SIGKILLed

	stopC <-chan struct{} // cfg.Stop until it closed
	grace graceState      // the checkpoint step (grace_linux.go)
}

func (s *supervisor) closeAll() {
	for _, f := range s.toClose {
		f.Close()
	}
	s.toClose = nil
	if s.stdinW != nil {
		s.stdinW.Close()
	}
	if s.killTimer != nil {
		s.killTimer.Stop()
	}
	s.grace.stop()
}

// stdio returns the child's fds 0, 1, 2.
func (s *supervisor) stdio() ([3]*os.File, error) {
	var fds [3]*os.File
	switch in := s.cfg.Stdin.(type) {
	case nil:
		fds[0] = os.Stdin
	case *os.File:
		fds[0] = in
	default:
		r, w, err := os.Pipe()
		if err != nil {
			return fds, fmt.Errorf("stdin pipe: %w", err)
		}
		fds[0], s.stdinW = r, w
		s.toClose = append(s.toClose, r)
	}
	for i, w := range []io.Writer{s.cfg.Stdout, s.cfg.Stderr} {
		if outer, tty := isTerminal(w); tty && !s.cfg.NoPTY {
			p, err := openPTY(outer)
			if err != nil {
				return fds, err
			}
			s.ptys = append(s.ptys, p)
			fds[i+1] = p.slave
			s.toClose = append(s.toClose, p.slave)
			s.readers = append(s.readers, p.master)
			continue
		}
		r, wr, err := os.Pipe()
		if err != nil {
			return fds, fmt.Errorf("output pipe: %w", err)
		}
		growPipe(r)
		fds[i+1] = wr
		s.toClose = append(s.toClose, wr)
		s.readers = append(s.readers, r)
	}
	return fds, nil
}

func (s *supervisor) run(l *launch) (Result, error) {
	fds, err := s.stdio()
	if err != nil {
		for _, r := range s.readers {
			r.Close()
		}
		return Result{}, err
	}
	files := []uintptr{fds[0].Fd(), fds[1].Fd(), fds[2].Fd()}
	sys := l.sys
	sys.Setsid = true
	if _, tty := isTerminal(fds[1]); tty {
		sys.Setctty, sys.Ctty = true, 1
	} else if _, tty := isTerminal(fds[2]); tty {
		sys.Setctty, sys.Ctty = true, 2
	}
	env := l.env
	var statusR *os.File
	if l.spec != nil {
		r, w, err := os.Pipe()
		if err != nil {
			return Result{}, fmt.Errorf("status pipe: %w", err)
		}
		statusR = r
		defer r.Close()
		s.toClose = append(s.toClose, w)
		files = append(files, w.Fd())
		l.spec.StatusFD = 3
		if env, err = l.withSpec(); err != nil {
			return Result{}, err
		}
	}

	// Catch every signal before the child exists, so that none sent to
	// ncclrun once CMD is started is missed (caught once for the process,
	// never stopped).
	waitSignals()
	s.termCh, s.sigCh, s.chldCh = caught.term, caught.ch, caught.chld
	for len(s.sigCh) > 0 {
		<-s.sigCh // caught before there was a child to forward it to
	}
	if s.self != 1 {
		_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	}

	var pid int
	withInheritedPages(func() {
		pid, err = syscall.ForkExec(l.path, l.argv, &syscall.ProcAttr{Env: env, Files: files, Sys: &sys})
	})
	for _, f := range s.toClose {
		f.Close()
	}
	s.toClose = nil
	if err != nil {
		for _, r := range s.readers {
			r.Close()
		}
		if errors.Is(err, syscall.EPERM) {
			return Result{}, fmt.Errorf("start %q: %w", s.cfg.Path, err)
		}
		return Result{}, execError(s.cfg.Path, l.target(), err)
	}
	s.pid = pid
	if statusR != nil {
		b, _ := io.ReadAll(statusR) // EOF when the trampoline's exec succeeded
		if len(b) > 0 {
			var ws syscall.WaitStatus
			_, _ = syscall.Wait4(pid, &ws, 0, nil)
			for _, r := range s.readers {
				r.Close()
			}
			var f trampolineFailure
			if err := json.Unmarshal(b, &f); err != nil {
				return Result{}, fmt.Errorf("start %q: trampoline said %q", s.cfg.Path, b)
			}
			return Result{}, failureError(s.cfg.Path, l.target(), f)
		}
	}

	if s.stdinW != nil {
		go func(w *os.File, r io.Reader) {
			_, _ = io.Copy(w, r)
			w.Close()
		}(s.stdinW, s.cfg.Stdin)
		s.stdinW = nil
	}
	var t *tap
	if s.cfg.Tap != nil {
		t = newTap(s.cfg.Tap)
	}
	var wg sync.WaitGroup
	for i, r := range s.readers {
		wg.Add(1)
		w, st := s.cfg.Stdout, Stdout
		if i == 1 {
			w, st = s.cfg.Stderr, Stderr
		}
		go func() { defer wg.Done(); relay(r, w, st, t, s.cfg.OnOutputError) }()
	}
	relaysDone := make(chan struct{})
	go func() { wg.Wait(); close(relaysDone) }()

	s.supervise(relaysDone)
	res := ResultOf(*s.status)
	if t != nil {
		res.TapShed, res.TapLost = t.close()
	}
	return res, nil
}
