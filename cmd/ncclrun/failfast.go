package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/ncclrun/ncclrun/diagnosis"
	"github.com/ncclrun/ncclrun/internal/cmdkind"
	"github.com/ncclrun/ncclrun/launcher"
)

// What run decides for a job beyond relaying it: stop a job that runs
// degraded (--on-degraded), let the training processes checkpoint before a
// shutdown (--stop-grace, --checkpoint-signal), and give a failure that no
// retry can fix an exit status of its own (--misconfig-exit). Every one is
// off by default (docs/cli.md "Stopping early, stopping gracefully").

// Flag names of the policy.
const (
	flagOnDegraded       = "on-degraded"
	flagStopGrace        = "stop-grace"
	flagCheckpointSignal = "checkpoint-signal"
	flagMisconfigExit    = "misconfig-exit"
)

// failFast is the policy as the flags set it; the zero value changes
// nothing.
type failFast struct {
	onDegradedFail bool
	stopGrace      time.Duration
	checkpointSig  syscall.Signal // 0 when stopGrace is 0
	misconfigExit  int            // 0: off
}

// parseFailFast reads the policy's flags; a mistake is a usage error.
func parseFailFast(c *cli.Context) (failFast, error) {
	var f failFast
	w, err := ownWord(c, flagOnDegraded)
	if err != nil {
		return f, err
	}
	f.onDegradedFail = w == "fail"
	f.stopGrace = c.Duration(flagStopGrace)
	if f.stopGrace < 0 {
		return f, usagef("--%s: %v is negative", flagStopGrace, f.stopGrace)
	}
	if name := c.String(flagCheckpointSignal); name != "" {
		if f.stopGrace == 0 {
			return f, usagef("--%s needs --%s (how long the training processes have to save)", flagCheckpointSignal, flagStopGrace)
		}
		sig, err := launcher.ParseCheckpointSignal(name)
		if err != nil {
			return f, usagef("--%s: %v", flagCheckpointSignal, err)
		}
		f.checkpointSig = sig
	} else if f.stopGrace > 0 {
		f.checkpointSig = unix.SIGUSR1
	}
	if v := strings.TrimSpace(c.String(flagMisconfigExit)); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > maxChildExitStatus {
			return f, usagef("--%s: %q is not an exit status (1..255; 0 is off)", flagMisconfigExit, v)
		}
		f.misconfigExit = n
	}
	return f, nil
}

// configure sets the checkpoint step in the launcher's Config. The
// training processes are the ones cmdkind names: torchrun's workers (its
// agent would die of SIGUSR1), or else CMD itself (mpirun included: Open
// MPI forwards SIGUSR1 and SIGUSR2 to its ranks).
func (f failFast) configure(cfg *launcher.Config, cmd cmdkind.Command, stderr io.Writer) {
	if f.stopGrace <= 0 {
		return
	}
	cfg.StopGrace, cfg.CheckpointSignal = f.stopGrace, f.checkpointSig
	what := "CMD"
	if cmd.CheckpointChildren() {
		cfg.CheckpointTo, what = launcher.CheckpointChildren, "CMD's children"
		if cmd.Torchrun() {
			what = "torchrun's workers"
		}
	}
	cfg.OnCheckpoint = func(term syscall.Signal, reached int) {
		if reached == 0 {
			fprintf(stderr, "ncclrun: %s: no training process to send %s to (%s); forwarding %s now\n",
				unix.SignalName(term), unix.SignalName(f.checkpointSig), what, unix.SignalName(term))
			return
		}
		fprintf(stderr, "ncclrun: %s: sent %s to %d training process(es) (%s); %s follows once they exit, at most %v from now\n",
			unix.SignalName(term), unix.SignalName(f.checkpointSig), reached, what, unix.SignalName(term), f.stopGrace)
	}
}

// failRun is the policy during one run. A nil *failRun is the default
// policy: it changes nothing.
type failRun struct {
	mu      sync.Mutex // found runs on the Watch's feeders, end and verdict on run's goroutine
	f       failFast
	stop    chan struct{} // closed once: launcher.Config.Stop; nil without --on-degraded fail
	stopped *diagnosis.Diagnosis
	over    bool // CMD has exited: a diagnosis found now stops nothing
}

func newFailRun(f failFast) *failRun {
	r := &failRun{f: f}
	if f.onDegradedFail {
		r.stop = make(chan struct{})
	}
	return r
}

// stopChan is launcher.Config.Stop: nil unless --on-degraded fail.
func (r *failRun) stopChan() <-chan struct{} {
	if r == nil || r.stop == nil {
		return nil
	}
	return r.stop
}

// end says that CMD has exited: what is found from now on stops nothing.
func (r *failRun) end() {
	if r != nil {
		r.mu.Lock()
		r.over = true
		r.mu.Unlock()
	}
}

// found is told every diagnosis as the watch finds it, while CMD runs; it
// returns the line to print when it stops CMD.
func (r *failRun) found(d diagnosis.Diagnosis, cmd string) string {
	if r == nil || r.stop == nil || d.ID != diagnosis.Degraded || d.Certainty != diagnosis.Certain {
		return ""
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.over || r.stopped != nil {
		return ""
	}
	r.stopped = &d
	close(r.stop)
	return fmt.Sprintf("ncclrun: --%s fail: stopping %s as SIGTERM would (%s is certain); ncclrun will exit %d\n", flagOnDegraded, cmd, diagnosis.Degraded, ExitDegraded)
}

// verdict is run's exit status and, when the policy changed it, the line
// that says why (printed, and first in the termination message).
func (r *failRun) verdict(res launcher.Result, ds []diagnosis.Diagnosis) (int, string) {
	if r == nil {
		return res.ExitCode, ""
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped != nil && res.ExitCode != 0 { // a CMD that succeeded before the stop reached it keeps 0
		return ExitDegraded, fmt.Sprintf("ncclrun: --%s fail: CMD was stopped because NCCL runs degraded (%s); CMD's exit status %d, ncclrun's %d\n",
			flagOnDegraded, diagnosis.Degraded, res.ExitCode, ExitDegraded)
	}
	if r.f.misconfigExit == 0 || res.ExitCode == 0 {
		return res.ExitCode, ""
	}
	if id := diagnosis.Misconfiguration(ds); id != "" {
		return r.f.misconfigExit, fmt.Sprintf("ncclrun: --%s: CMD failed (exit status %d) and %s is certain, a deployment misconfiguration that fails the same way on every retry; ncclrun exits %d\n",
			flagMisconfigExit, res.ExitCode, id, r.f.misconfigExit)
	}
	return res.ExitCode, ""
}
