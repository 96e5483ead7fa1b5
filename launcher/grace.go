package launcher

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Checkpoint names the processes that get Config.CheckpointSignal: the
// training processes, which save their state when told and before the
// terminating signal reaches the job.
type Checkpoint int

const (
	// CheckpointChild signals the main child.
	CheckpointChild Checkpoint = iota
	// CheckpointChildren signals the main child's own children alive at
	// that moment, and not the main child.
	CheckpointChildren
)

// ParseCheckpointSignal reads a Config.CheckpointSignal as `kill -s` takes
// a signal: SIGUSR1, USR1 or 10. SIGKILL and SIGSTOP are refused: they
// cannot be caught, so no process could save on them.
func ParseCheckpointSignal(s string) (syscall.Signal, error) {
	s = strings.ToUpper(strings.TrimSpace(s))
	var sig syscall.Signal
	if n, err := strconv.Atoi(s); err == nil {
		sig = syscall.Signal(n)
		if n <= 0 || n > 64 || unix.SignalName(sig) == "" {
			return 0, fmt.Errorf("%q is not a signal", s)
		}
	} else {
		if !strings.HasPrefix(s, "SIG") {
			s = "SIG" + s
		}
		if sig = unix.SignalNum(s); sig == 0 {
			return 0, fmt.Errorf("%q is not a signal name", s)
		}
	}
	if sig == unix.SIGKILL || sig == unix.SIGSTOP {
		return 0, fmt.Errorf("%s cannot be caught: no process can save on it", unix.SignalName(sig))
	}
	return sig, nil
}
