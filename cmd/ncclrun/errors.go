package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/ncclrun/ncclrun/internal/printable"
	"github.com/ncclrun/ncclrun/launcher"
)

// Exit statuses of ncclrun itself (docs/contract.md "Exit status of run"). A
// child's own status passes through unchanged.
const (
	ExitOK             = 0
	ExitCheckFailed    = 1   // doctor: a check failed
	ExitUsage          = 2   // bad flag, bad size, no CMD, unreadable explain input
	ExitStrict         = 78  // --strict and a preflight check failed (EX_CONFIG)
	ExitDegraded       = 79  // --on-degraded fail stopped CMD (failfast.go)
	ExitHang           = 80  // --on-hang stop stopped CMD (hang.go)
	ExitInternal       = 125 // ncclrun could not supervise CMD (docker run's convention)
	ExitNotExecutable  = 126 // CMD exists but cannot be executed
	ExitNotFound       = 127 // CMD not found
	exitSignalBase     = 128
	maxChildExitStatus = 255
)

// usageError is a mistake in ncclrun's own command line or input: one line
// on stderr and ExitUsage.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
}

// statusError carries an exit status whose explanation, if any, has already
// been printed (the child's status, doctor's verdict, --strict).
type statusError struct{ code int }

func (e *statusError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func exitWith(code int) error {
	if code == 0 {
		return nil
	}
	return &statusError{code}
}

// startError is launcher's failure to start CMD, with the command name for
// the one-line message.
type startError struct {
	cmd string
	err error
}

func (e *startError) Error() string { return fmt.Sprintf("%s: %v", e.cmd, e.err) }
func (e *startError) Unwrap() error { return e.err }

// exitCoder is what launcher's typed start errors implement.
type exitCoder interface{ ExitCode() int }

// say prints one line of ncclrun's own on stderr, its text printable: a
// file name or a flag from the command line may carry an escape sequence or
// invalid UTF-8, which must show, not act on the terminal.
func say(stderr io.Writer, format string, args ...any) {
	fmt.Fprintf(stderr, "ncclrun: %s\n", printable.String(strings.TrimSuffix(fmt.Sprintf(format, args...), "\n")))
}

// exitStatus is the one mapping from an error to ncclrun's exit status; it
// prints the one-line message the error calls for on stderr.
func exitStatus(err error, stderr io.Writer) int {
	var (
		ue *usageError
		se *statusError
		st *startError
		ec exitCoder
	)
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &se):
		return se.code
	case errors.As(err, &ue):
		say(stderr, "%v", ue.err)
		return ExitUsage
	case errors.As(err, &st):
		code := launcher.StartStatus(st.err)
		if errors.As(st.err, &ec) && ec.ExitCode() == code {
			// launcher's typed error already says which command and why, in one line.
			say(stderr, "%v", st.err)
			return code
		}
		switch code {
		case ExitNotFound:
			say(stderr, "%s: command not found (%v)", st.cmd, st.err)
		case ExitNotExecutable:
			say(stderr, "%s: cannot execute (%v)", st.cmd, st.err)
		default:
			say(stderr, "%s: %v", st.cmd, st.err)
		}
		return code
	case errors.As(err, &ec) && ec.ExitCode() > 0:
		say(stderr, "%v", err)
		return ec.ExitCode()
	default:
		say(stderr, "%v", err)
		return ExitInternal
	}
}
