package main

import (
	"errors"
	"io"
	"syscall"
)

// checkedStdout is the stdout of every command but run (whose stdout is
// CMD's, relayed): it remembers the first failed write, so that output
// lost to a full disk ends in one line on stderr and ExitInternal, also
// where the command itself did not look at the error of its write
// (version, the help). A pipe whose reader is gone (`ncclrun lint DIR |
// head -1`) is not a failure: the reader wanted no more, and the command
// ends quietly with its own status, as grep and git do. A stdout closed at
// start is not seen: the Go runtime opens /dev/null in its place before
// main.
type checkedStdout struct {
	w   io.Writer
	err error
}

func (c *checkedStdout) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	if c.err == nil {
		c.err = err
	}
	return n, err
}

// outputFailure is the status of a command whose stdout failed: err as
// exitStatus maps it when the command already returned a failure that says
// why (a usage error, the write error itself); else one line and
// ExitInternal, instead of a success or a status nothing on stdout
// explained.
func (c *checkedStdout) outputFailure(err error, stderr io.Writer) (int, bool) {
	if c.err == nil || readerGone(c.err) {
		return 0, false
	}
	var se *statusError
	if err != nil && !errors.As(err, &se) {
		return 0, false
	}
	fprintf(stderr, "ncclrun: %v\n", c.err)
	return ExitInternal, true
}

// readerGone reports whether err is a write to a pipe (or socket) whose
// reader has closed it: EPIPE (ncclrun writes through duplicates of its
// stdout and stderr, so it gets the error instead of dying of SIGPIPE;
// main.go).
func readerGone(err error) bool { return errors.Is(err, syscall.EPIPE) }

// quietEPIPE is err, or nil when what failed was a write to a stdout whose
// reader is gone: the command's output was not wanted any further, and
// its own status stands (a command that sees its write fail goes on to
// decide that status, as lint and doctor do).
func quietEPIPE(err error) error {
	if readerGone(err) {
		return nil
	}
	return err
}
