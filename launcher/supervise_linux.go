package launcher

import (
	"errors"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// phase is where the supervisor is in the main child's life. Each phase
// owns some of the loop's events; the others wait in their channels.
type phase int

const (
	// running: the main child runs. Signals are forwarded to it; Stop, the
	// checkpoint step and the kill timer act on it and its tree.
	running phase = iota
	// draining: the main child has exited and is reaped. The output left
	// in the pipes is relayed until they close or for at most
	// drainTimeout; a terminating signal only arms the kill timer, which
	// kills the tree when it fires, as in the other phases.
	draining
	// reaping: the output is relayed. During a shutdown the descendants
	// left are waited for until the kill timer kills them, then (at most
	// reapTimeout) until they are gone; otherwise they get SIGTERM and
	// nothing is waited for.
	reaping
	// finished: nothing is left to wait for; supervise returns.
	finished
)

// supervise is Run's one event loop, from the fork until the main child
// and what it left behind are dealt with: it reaps every child of
// ncclrun (SIGCHLD), forwards signals, fires the kill timer (in every
// phase), starts the checkpoint step (Stop, a terminating signal) and
// ends it, ends the output drain and gives up on descendants that do not
// die. relaysDone is closed when the relays have written all the output.
// When it returns, s.status is the main child's.
func (s *supervisor) supervise(relaysDone <-chan struct{}) {
	s.stopC = s.cfg.Stop
	var drainC, giveUpC <-chan time.Time
	s.reap()
	for s.phase != finished {
		switch s.phase {
		case running:
			if s.status != nil {
				if s.cfg.OnExit != nil {
					s.cfg.OnExit()
				}
				s.phase = draining
				drain := time.NewTimer(drainTimeout)
				defer drain.Stop()
				drainC = drain.C
			}
		case reaping:
			s.reap()
			if ds, err := descendants(s.procRoot, s.self); err != nil || len(ds) == 0 {
				s.phase = finished
				continue
			}
		}
		// Stop and the checkpoint step act on a running child, the end of
		// the output only once it has exited; the drain and give-up timers
		// run only in their phase. Events of another phase wait in their
		// channels.
		var stopC, graceC, relaysC <-chan struct{}
		switch s.phase {
		case running:
			stopC, graceC = s.stopC, s.grace.done
		case draining:
			relaysC = relaysDone
		}
		select {
		case <-s.chldCh:
			s.reap()
		case sig := <-s.termCh:
			s.signal(sig.(syscall.Signal))
		case sig := <-s.sigCh:
			s.signal(sig.(syscall.Signal))
		case <-s.killC:
			s.killTree()
			if s.phase == reaping {
				giveUpC = time.After(reapTimeout)
			}
		case <-stopC:
			s.stopC = nil
			if !s.shutdown { // a shutdown under way is not begun again
				s.handle(unix.SIGTERM)
			}
		case <-graceC:
			s.endGrace()
		case <-drainC:
			drainC = nil
			for _, r := range s.readers {
				_ = r.SetReadDeadline(time.Now())
			}
		case <-relaysC:
			drainC = nil
			s.phase = s.leftovers()
			if s.killed {
				giveUpC = time.After(reapTimeout)
			}
		case <-giveUpC:
			s.phase = finished
		}
	}
	s.reap()
}

// signal acts on one caught signal: forwarded while the main child runs,
// only a terminating one counts once it has exited.
func (s *supervisor) signal(sig syscall.Signal) {
	if s.phase == running {
		s.handle(sig)
	} else {
		s.handleAfterExit(sig)
	}
}

// leftovers begins the reaping phase, once the output is relayed. During
// a shutdown (a terminating signal was forwarded) the descendants left
// have until the kill timer fires (armed now with KillAfter 0): reaping.
// Otherwise they get SIGTERM and nothing is waited for: finished.
func (s *supervisor) leftovers() phase {
	if s.shutdown {
		s.armKill()
	}
	if s.killTimer != nil {
		return reaping
	}
	if s.noChildren() {
		return finished // the common case: no /proc walk (about 1.5 ms of start-up)
	}
	ds, _ := descendants(s.procRoot, s.self)
	for _, p := range ds {
		if p.State != 'Z' && p.State != 'X' {
			_ = unix.Kill(p.PID, unix.SIGTERM)
		}
	}
	return finished
}

// reap collects every child that has exited; the main child's status is
// kept. It is the only place that waits.
func (s *supervisor) reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if pid <= 0 || err != nil {
			return
		}
		if pid == s.pid {
			st := ws
			s.status = &st
		}
	}
}

// handle forwards one signal to the running main child.
func (s *supervisor) handle(sig syscall.Signal) {
	switch sig {
	case unix.SIGPIPE:
		return
	case unix.SIGWINCH:
		for _, p := range s.ptys {
			p.resize()
		}
	case unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU:
		// The child leads its own session, so its process group is
		// orphaned and the kernel discards these stop signals for it:
		// stop the group with SIGSTOP, then stop ncclrun itself so that
		// the shell sees the job stop (dumb-init does the same).
		s.signalGroup(unix.SIGSTOP)
		_ = unix.Kill(s.self, unix.SIGSTOP)
		return
	case unix.SIGCONT:
		s.signalGroup(unix.SIGCONT)
		return
	}
	if terminating(sig) && s.holdForGrace(sig) {
		return
	}
	_ = unix.Kill(s.pid, sig) // ESRCH: it is exiting; the reaper will see it
	if terminating(sig) {
		s.shutdown = true
		if s.cfg.KillAfter > 0 {
			s.armKill()
		}
	}
}

// handleAfterExit handles a signal that came after the main child exited:
// a terminating one starts (or keeps) the kill timer for what is left.
func (s *supervisor) handleAfterExit(sig syscall.Signal) {
	if terminating(sig) {
		s.shutdown = true
		s.armKill()
	}
}

// leftoverGrace is DefaultKillAfter; tests shorten it.
var leftoverGrace = DefaultKillAfter

// armKill starts the kill timer unless it runs: KillAfter, or with
// KillAfter 0 (only armed once the main child has exited) leftoverGrace.
func (s *supervisor) armKill() {
	if s.killTimer == nil {
		d := s.cfg.KillAfter
		if d <= 0 {
			d = leftoverGrace
		}
		s.killTimer = time.NewTimer(d)
		s.killC = s.killTimer.C
	}
}

// signalGroup signals the main child's process group (it leads it), or
// the child alone if the group is gone.
func (s *supervisor) signalGroup(sig syscall.Signal) {
	if err := unix.Kill(-s.pid, sig); err != nil {
		_ = unix.Kill(s.pid, sig)
	}
}

// noChildren reports whether ncclrun has no child process left, running
// or waiting to be reaped. Every descendant of a subreaper (or PID 1) is
// a child of it or below one, so then there are no descendants either.
// It reaps nothing (WNOWAIT).
func (s *supervisor) noChildren() bool {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	return errors.Is(err, unix.ECHILD)
}

// killTree sends SIGKILL to every descendant of ncclrun, whatever its
// session or process group (torchrun starts each worker in a session of
// its own), orphans reparented to ncclrun included. It repeats while new
// processes show up.
func (s *supervisor) killTree() {
	s.killC = nil
	s.killed = true
	for round := 0; round < 10; round++ {
		ds, err := descendants(s.procRoot, s.self)
		if err != nil {
			_ = unix.Kill(-s.pid, unix.SIGKILL)
			_ = unix.Kill(s.pid, unix.SIGKILL)
			return
		}
		n := 0
		for _, p := range ds {
			if p.State != 'Z' && p.State != 'X' {
				_ = unix.Kill(p.PID, unix.SIGKILL)
				n++
			}
		}
		if n == 0 {
			return
		}
	}
}
