package main

import (
	"errors"
	"io"
)

// checkedStdout is the stdout of every command but run (whose stdout is
// CMD's, relayed): it remembers the first failed write, so that output
// lost to a full disk or a closed pipe ends in one line on stderr and
// ExitInternal, also where the command itself did not look at the error of
// its write (version, the help). A stdout closed at start is not seen: the
// Go runtime opens /dev/null in its place before main.
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
	if c.err == nil {
		return 0, false
	}
	var se *statusError
	if err != nil && !errors.As(err, &se) {
		return 0, false
	}
	fprintf(stderr, "ncclrun: %v\n", c.err)
	return ExitInternal, true
}
