package launcher

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// withFd runs fn with f's descriptor without File.Fd's side effect of
// switching a pollable file to blocking mode (which would disable read
// deadlines).
func withFd(f *os.File, fn func(fd int)) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	return rc.Control(func(fd uintptr) { fn(int(fd)) })
}

// isTerminal reports whether w is an *os.File open on a terminal.
func isTerminal(w any) (*os.File, bool) {
	f, ok := w.(*os.File)
	if !ok || f == nil {
		return nil, false
	}
	var isTTY bool
	_ = withFd(f, func(fd int) {
		_, err := unix.IoctlGetTermios(fd, unix.TCGETS)
		isTTY = err == nil
	})
	return f, isTTY
}

// ptyPair is a pseudo terminal for one output stream: the child writes to
// slave, ncclrun reads master (non-blocking, so read deadlines work).
type ptyPair struct {
	master, slave *os.File
	outer         *os.File // the terminal the output is relayed to
}

// openPTY opens a pseudo terminal whose window size is outer's and whose
// output processing is off (no "\n" -> "\r\n"), so the bytes relayed are
// the bytes the child wrote. creack/pty is not used because its ioctls go
// through File.Fd, which turns the master back to blocking mode.
func openPTY(outer *os.File) (*ptyPair, error) {
	m, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("open /dev/ptmx: %w", err)
	}
	fail := func(err error) (*ptyPair, error) { unix.Close(m); return nil, err }
	if err := unix.IoctlSetPointerInt(m, unix.TIOCSPTLCK, 0); err != nil {
		return fail(fmt.Errorf("unlock pty: %w", err))
	}
	n, err := unix.IoctlGetInt(m, unix.TIOCGPTN)
	if err != nil {
		return fail(fmt.Errorf("pty number: %w", err))
	}
	name := fmt.Sprintf("/dev/pts/%d", n)
	s, err := unix.Open(name, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fail(fmt.Errorf("open %q: %w", name, err))
	}
	if t, err := unix.IoctlGetTermios(s, unix.TCGETS); err == nil {
		t.Oflag &^= unix.OPOST
		_ = unix.IoctlSetTermios(s, unix.TCSETS, t)
	}
	p := &ptyPair{master: os.NewFile(uintptr(m), "/dev/ptmx"), slave: os.NewFile(uintptr(s), name), outer: outer}
	p.resize()
	return p, nil
}

// resize copies the outer terminal's window size to the pty.
func (p *ptyPair) resize() {
	_ = withFd(p.outer, func(ofd int) {
		ws, err := unix.IoctlGetWinsize(ofd, unix.TIOCGWINSZ)
		if err != nil {
			return
		}
		_ = withFd(p.master, func(mfd int) { _ = unix.IoctlSetWinsize(mfd, unix.TIOCSWINSZ, ws) })
	})
}
