package launcher

import (
	"errors"
	"fmt"
	"io/fs"
	"os/exec"
	"syscall"
)

// Sentinel errors. Match them with errors.Is; the errors returned carry the
// command, the user or the capability they are about.
var (
	// ErrUnsupported is returned by Run, Exec and RaiseMemlock on
	// platforms other than Linux.
	ErrUnsupported = errors.New("launcher: supported on Linux only")
	// ErrNotFound means the command does not exist (exit status 127).
	ErrNotFound = errors.New("command not found")
	// ErrNoInterpreter means the command exists but the interpreter it
	// needs does not: the one its #! line names, or an ELF binary's
	// dynamic loader (exit status 127, as ErrNotFound, which it comes
	// with).
	ErrNoInterpreter = errors.New("cannot execute: the interpreter it needs was not found (its #! line's, or an ELF binary's loader)")
	// ErrNotExecutable means the command exists but cannot be executed:
	// no execute permission, a directory, a bad format (exit status 126).
	ErrNotExecutable = errors.New("command not executable")
	// ErrNoIPCLock means AmbientIPCLock was asked for but ncclrun does not
	// hold CAP_IPC_LOCK in its permitted set, so it cannot hand it on.
	ErrNoIPCLock = errors.New("CAP_IPC_LOCK is not in ncclrun's permitted capability set")
	// ErrUser means Config.User could not be resolved or applied.
	ErrUser = errors.New("invalid user")
	// ErrMemlock means Config.Memlock cannot be applied: a hard limit
	// above ncclrun's own without CAP_SYS_RESOURCE, or soft above hard.
	ErrMemlock = errors.New("memlock")
	// ErrCapability means a capability name in Config.DropCaps is unknown
	// or a capability change is not permitted.
	ErrCapability = errors.New("capability")
)

// noInterpreterError is execve's ENOENT for a command that exists: its
// message is ErrNoInterpreter's alone, and it is ErrNotFound for the exit
// status.
type noInterpreterError struct{ errno error }

func (e noInterpreterError) Error() string { return ErrNoInterpreter.Error() }

func (e noInterpreterError) Unwrap() []error {
	return []error{ErrNoInterpreter, ErrNotFound, e.errno}
}

// StartError is returned by Run and Exec when the command could not be
// started: it was not found or is not executable. Err wraps ErrNotFound or
// ErrNotExecutable and, where one exists, the errno of the failed execve.
type StartError struct {
	Path string // the command as given in Config.Path
	Err  error
}

// Error is one line: `"CMD": command not found: no such file or directory`.
func (e *StartError) Error() string { return fmt.Sprintf("%q: %v", e.Path, e.Err) }

// Unwrap returns the wrapped cause.
func (e *StartError) Unwrap() error { return e.Err }

// ExitCode is the status a shell (and ncclrun) exits with for this failure:
// 127 when the command was not found, 126 otherwise.
func (e *StartError) ExitCode() int {
	if errors.Is(e.Err, ErrNotFound) {
		return 127
	}
	return 126
}

// StartStatus classifies err, a failure of Run or Exec to start the
// command, as bash and tini do: 127 not found, 126 found but not
// executable, 125 (docker run's status for a failure of its own)
// otherwise, the credentials or limit the launcher could not give the
// command among them whatever their errno.
func StartStatus(err error) int {
	var ec interface{ ExitCode() int } // *StartError, or another typed start error
	switch {
	case errors.As(err, &ec) && (ec.ExitCode() == 127 || ec.ExitCode() == 126):
		return ec.ExitCode()
	case errors.Is(err, ErrMemlock), errors.Is(err, ErrUser), errors.Is(err, ErrCapability), errors.Is(err, ErrNoIPCLock):
		// A limit, user or capability change refused (EPERM from the
		// trampoline's setrlimit, setgroups or capset): a privilege
		// ncclrun lacks, not a command that cannot be executed.
		return 125
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		return 127
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.ENOEXEC),
		errors.Is(err, syscall.EISDIR), errors.Is(err, exec.ErrDot):
		return 126
	default:
		return 125
	}
}
