package launcher

import (
	"errors"
	"io"
	"os"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// maxSplice bounds one tee(2)/splice(2) call; a pipe holds less anyway.
const maxSplice = 1 << 20

// relayAuto relays r to w. When both are pipes it moves the bytes with
// splice(2), without copying them through ncclrun, and duplicates them
// for the tap with tee(2) (spliceRelay); otherwise it copies (relayNotify).
// Either way each chunk is passed on as soon as the child wrote it.
func relayAuto(r *os.File, w io.Writer, s Stream, t *tap, onErr func(Stream, error)) {
	if wf, ok := w.(*os.File); ok {
		rfd, rok := rawFD(r)
		wfd, wok := rawFD(wf)
		if rok && wok && isFIFO(rfd) && isFIFO(wfd) && spliceRelay(r, rfd, wfd, s, t, onErr) {
			runtime.KeepAlive(wf)
			return
		}
	}
	relayNotify(r, w, s, t, onErr)
}

// rawFD returns f's descriptor without f.Fd()'s side effect of putting it
// in blocking mode.
func rawFD(f *os.File) (int, bool) {
	rc, err := f.SyscallConn()
	if err != nil {
		return -1, false
	}
	fd := -1
	if rc.Control(func(u uintptr) { fd = int(u) }) != nil {
		return -1, false
	}
	return fd, fd >= 0
}

func isFIFO(fd int) bool {
	var st unix.Stat_t
	return unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFIFO
}

// spliceRelay is relayNotify for a pipe r (descriptor rfd, non-blocking,
// in Go's poller) and an output pipe wfd: for each batch of bytes in r it
// tees them into the tap's pipe for s (dropping from the tap, never from
// the relay, what does not fit) and splices them to wfd, waiting for room
// there as a write would. After a write error (EPIPE) the bytes are still
// teed and then read and discarded, so the child never blocks. It returns
// false, having consumed nothing, when it cannot start (then the caller
// copies instead), true at end of file or when r's read deadline passes.
func spliceRelay(r *os.File, rfd, wfd int, s Stream, t *tap, onErr func(Stream, error)) bool {
	rc, err := r.SyscallConn()
	if err != nil {
		return false
	}
	tfd := -1
	var marks *gapMarks
	if t != nil {
		tr, tw, err := os.Pipe()
		if err != nil {
			return false
		}
		defer tw.Close()
		if fd, ok := rawFD(tw); ok {
			tfd = fd
		}
		marks = &gapMarks{}
		t.readers.Add(1)
		go t.readPipe(s, tr, marks)
		defer runtime.KeepAlive(tw)
	}
	defer r.Close()
	var teedTotal int64
	var scratch []byte
	writing := true
	for {
		n, err := pipeAvail(rc)
		if err != nil || n == 0 {
			return true
		}
		n = min(n, maxSplice)
		if tfd >= 0 {
			teed := 0
			for {
				k, err := unix.Tee(rfd, tfd, n, unix.SPLICE_F_NONBLOCK)
				if errors.Is(err, unix.EINTR) {
					continue
				}
				if err == nil {
					teed = int(k)
				}
				break // EAGAIN: the tap pipe is full
			}
			teedTotal += int64(teed)
			if teed < n {
				t.dropped.Add(int64(n - teed))
				marks.add(teedTotal)
			}
		}
		left := n
		if writing {
			moved, err := spliceOut(rfd, wfd, n)
			left -= moved
			if err != nil {
				writing = false
				if onErr != nil {
					onErr(s, err)
				}
			}
		}
		if left > 0 {
			if scratch == nil {
				scratch = make([]byte, relayBufSize)
			}
			if discard(rfd, left, scratch) != nil {
				return true
			}
		}
	}
}

// pipeAvail waits, through Go's poller (so r's read deadline applies),
// until the pipe behind rc holds bytes, and returns how many (FIONREAD);
// 0 at end of file (empty, and no writer left).
func pipeAvail(rc syscall.RawConn) (int, error) {
	var n int
	var err error
	rerr := rc.Read(func(fd uintptr) bool {
		for {
			n, err = unix.IoctlGetInt(int(fd), unix.TIOCINQ)
			if err != nil || n > 0 {
				return true
			}
			pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			if _, err = unix.Poll(pfd, 0); err != nil {
				if errors.Is(err, unix.EINTR) {
					continue
				}
				return true
			}
			switch ev := pfd[0].Revents; {
			case ev&unix.POLLIN != 0:
				continue // written since the count
			case ev&(unix.POLLHUP|unix.POLLERR) != 0:
				return true // end of file: n == 0
			}
			return false // wait for the poller
		}
	})
	if rerr != nil {
		return 0, rerr
	}
	return n, err
}

// spliceOut moves exactly n bytes, known to be in pipe rfd, to pipe wfd,
// waiting for room in wfd as a blocking write would. It returns how many
// it moved and the first error (EPIPE when wfd has no reader left).
func spliceOut(rfd, wfd, n int) (int, error) {
	moved := 0
	for moved < n {
		// rfd is non-blocking, which makes a pipe-to-pipe splice
		// non-blocking on both sides: EAGAIN means wfd is full.
		m, err := unix.Splice(rfd, nil, wfd, nil, n-moved, unix.SPLICE_F_MOVE)
		switch {
		case err == nil && m > 0:
			moved += int(m)
		case err == nil:
			return moved, io.ErrUnexpectedEOF // cannot happen: nobody else reads rfd
		case errors.Is(err, unix.EINTR):
		case errors.Is(err, unix.EAGAIN):
			pfd := []unix.PollFd{{Fd: int32(wfd), Events: unix.POLLOUT}}
			if _, err := unix.Poll(pfd, -1); err != nil && !errors.Is(err, unix.EINTR) {
				return moved, err
			}
		default:
			return moved, err
		}
	}
	return moved, nil
}

// discard reads and drops n bytes known to be in pipe fd.
func discard(fd, n int, buf []byte) error {
	for n > 0 {
		m, err := unix.Read(fd, buf[:min(n, len(buf))])
		switch {
		case errors.Is(err, unix.EINTR):
		case err != nil:
			return err
		case m == 0:
			return io.ErrUnexpectedEOF
		default:
			n -= m
		}
	}
	return nil
}
