package main

import (
	"errors"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// errStdoutClosed is why every write of a command other than run fails
// when ncclrun was started with its stdout closed.
var errStdoutClosed = errors.New("stdout is closed")

// checkedStdout is the stdout of every command but run (whose stdout is
// CMD's, relayed): it remembers the first failed write, so that output
// lost to a full disk, a closed pipe or a closed stdout ends in one line
// on stderr and ExitInternal, also where the command itself did not look
// at the error of its write (version, the help).
type checkedStdout struct {
	w      io.Writer
	closed bool
	err    error
}

func (c *checkedStdout) Write(p []byte) (int, error) {
	if c.closed {
		err := &os.PathError{Op: "write", Path: "/dev/stdout", Err: errStdoutClosed}
		c.note(err)
		return 0, err
	}
	n, err := c.w.Write(p)
	c.note(err)
	return n, err
}

func (c *checkedStdout) note(err error) {
	if c.err == nil {
		c.err = err
	}
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

// stdoutClosed reports whether fd 1 was closed when ncclrun started. The Go
// runtime opens /dev/null read-write in place of a closed standard fd
// before main, so writes to it succeed and are lost; a shell's >/dev/null
// opens it write-only. A read-write /dev/null on stdout and stderr both is
// a daemon's stdio (daemon(3)), not a closed stdout, and there is no one
// to tell.
func stdoutClosed() bool {
	fl, err := unix.FcntlInt(1, unix.F_GETFL, 0)
	if err != nil || fl&unix.O_ACCMODE != unix.O_RDWR {
		return false
	}
	var null unix.Stat_t
	if unix.Stat(os.DevNull, &null) != nil {
		return false
	}
	isNull := func(fd int) bool {
		var st unix.Stat_t
		return unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == null.Rdev
	}
	return isNull(1) && !isNull(2)
}
