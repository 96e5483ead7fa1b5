package launcher

import (
	"errors"
	"math"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// graceState is the checkpoint step of a shutdown (Config.StopGrace): the
// terminating signal held back while the training processes save.
type graceState struct {
	held   syscall.Signal // the signal to forward when the grace ends; 0 when none runs
	given  bool           // the step ran (or had nothing to signal): later signals are forwarded at once
	done   <-chan struct{}
	cancel *os.File // closing it ends the watcher of a grace cut short
}

// holdForGrace is handle's checkpoint step for a terminating signal: on
// the first one, with CheckpointSignal and StopGrace set, it sends
// CheckpointSignal to the training processes and holds sig back until they
// have exited or StopGrace has passed (endGrace). A terminating signal
// during the grace cuts it short: the held signal is forwarded now, and
// sig too when it is another one. It reports whether sig was dealt with.
func (s *supervisor) holdForGrace(sig syscall.Signal) bool {
	g := &s.grace
	if g.held != 0 {
		held := g.held
		s.endGrace()
		return sig == held
	}
	if g.given || s.cfg.StopGrace <= 0 || s.cfg.CheckpointSignal == 0 {
		return false
	}
	g.given = true
	var pids []int
	for _, pid := range s.trainingPIDs() {
		if unix.Kill(pid, s.cfg.CheckpointSignal) == nil {
			pids = append(pids, pid)
		}
	}
	if s.cfg.OnCheckpoint != nil {
		s.cfg.OnCheckpoint(sig, len(pids))
	}
	if len(pids) == 0 {
		return false // nothing to wait for: forward sig now
	}
	g.held = sig
	s.shutdown = true
	g.done, g.cancel = watchExits(pids, s.cfg.StopGrace)
	return true
}

// endGrace ends the grace (its watcher said so, or it was cut short) and
// forwards the held signal.
func (s *supervisor) endGrace() {
	g := &s.grace
	sig := g.held
	g.held, g.done = 0, nil
	g.stop()
	if sig != 0 {
		s.handle(sig)
	}
}

// stop ends the watcher, if one runs.
func (g *graceState) stop() {
	if g.cancel != nil {
		g.cancel.Close()
		g.cancel = nil
	}
}

// trainingPIDs are the processes CheckpointTo names, those alive now.
func (s *supervisor) trainingPIDs() []int {
	if s.cfg.CheckpointTo != CheckpointChildren {
		return []int{s.pid}
	}
	ps, err := processTable(s.procRoot)
	if err != nil {
		return nil
	}
	var pids []int
	for _, p := range ps {
		if p.PPID == s.pid && p.State != 'Z' && p.State != 'X' {
			pids = append(pids, p.PID)
		}
	}
	return pids
}

// watchExits returns a channel closed once every process of pids has
// exited (a zombie counts: it saved what it would) or d has passed, and
// the file whose Close ends the watch early. The processes need not be
// ncclrun's children: each is watched through a pidfd (pidfd_open(2),
// Linux 5.3), which poll(2) reports readable when the process exits. A
// process whose pidfd cannot be opened for another reason than having
// exited is waited for the whole d.
func watchExits(pids []int, d time.Duration) (<-chan struct{}, *os.File) {
	done := make(chan struct{})
	r, w, err := os.Pipe()
	if err != nil {
		time.AfterFunc(d, func() { close(done) })
		return done, nil
	}
	var fds []int
	blind := false // some process cannot be watched
	for _, pid := range pids {
		fd, err := unix.PidfdOpen(pid, 0)
		switch {
		case err == nil:
			fds = append(fds, fd)
		case errors.Is(err, unix.ESRCH):
		default:
			blind = true
		}
	}
	go func() {
		defer close(done)
		defer r.Close()
		defer func() {
			for _, fd := range fds {
				unix.Close(fd)
			}
		}()
		deadline := time.Now().Add(d)
		for len(fds) > 0 || blind {
			left := time.Until(deadline)
			if left <= 0 {
				return
			}
			ms := int((left + time.Millisecond - 1) / time.Millisecond)
			ms = min(ms, math.MaxInt32)
			pfds := []unix.PollFd{{Fd: int32(r.Fd()), Events: unix.POLLIN}}
			for _, fd := range fds {
				pfds = append(pfds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
			}
			_, err := unix.Poll(pfds, ms)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil || pfds[0].Revents != 0 {
				return // cut short (the pipe's write end closed)
			}
			alive := fds[:0]
			for i, fd := range fds {
				if pfds[i+1].Revents != 0 {
					unix.Close(fd)
					continue
				}
				alive = append(alive, fd)
			}
			fds = alive
		}
	}()
	return done, w
}
