package launcher

import (
	"io"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// skimmer moves a stream's output from the child's pipe to ncclrun's
// output without the tap.
type skimmer struct {
	rc      syscall.RawConn // the child's pipe
	wfd     int             // the output's fd; -1: not a file, or splice refused
	w       io.Writer
	scratch []byte // for a destination splice cannot write to, or after a write error
	spliced bool   // a splice to the output worked
	grown   bool   // growOutput was called
}

// newSkimmer returns a skimmer for r (a pipe) and w, nil when r is not a
// pipe (a pty: the tap then takes everything, as before).
func newSkimmer(r *os.File, w io.Writer) *skimmer {
	var st unix.Stat_t
	rc, err := r.SyscallConn()
	if err != nil {
		return nil
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.Fstat(int(fd), &st) }); err != nil || serr != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
		return nil
	}
	k := &skimmer{rc: rc, wfd: -1, w: w}
	if f, ok := w.(*os.File); ok {
		if wc, err := f.SyscallConn(); err == nil {
			_ = wc.Control(func(fd uintptr) { k.wfd = int(fd) })
		}
	}
	return k
}

// skimMax is how much one skim moves at most before the caller asks the
// tap's budget again.
const skimMax = 4 << 20

// skim moves what the child writes (waiting for some, as a read does) to
// the output, or discards it when writing is false, until the child's pipe
// is empty or skimMax bytes have gone; it returns how many bytes it moved,
// the first write error (writing stops there: the caller reports it) and
// the read side's end (io.EOF, or a passed deadline).
func (k *skimmer) skim(writing bool) (n int, werr, rerr error) {
	k.growOutput()
	err := k.rc.Read(func(fd uintptr) bool {
		for n < skimMax {
			var m int
			var e error
			if writing && k.wfd >= 0 {
				m0, e0 := unix.Splice(int(fd), nil, k.wfd, nil, childPipeSize, unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
				m, e = int(m0), e0 // int64 or int, by architecture
			} else {
				if k.scratch == nil {
					k.scratch = make([]byte, relayReadSize)
				}
				m, e = unix.Read(int(fd), k.scratch)
				if m > 0 && writing {
					if _, err := k.w.Write(k.scratch[:m]); err != nil {
						werr, writing = err, false
					}
				}
			}
			switch {
			case m > 0:
				n += m
			case e == nil: // m == 0: no writer is left and the pipe is empty
				rerr = io.EOF
				return true
			case e == unix.EINTR:
			case e == unix.EAGAIN:
				// The child's pipe is empty, or (splice) the output is
				// full: then wait for room, as a blocking write does.
				if a, err := unix.IoctlGetInt(int(fd), unix.TIOCINQ); err != nil || a == 0 || !writing || k.wfd < 0 {
					// Empty. A splice into a full pipe says EAGAIN even
					// when the child's pipe has ended: no writer left
					// (POLLHUP) is its end.
					p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
					if _, err := unix.Poll(p, 0); err == nil && p[0].Revents&unix.POLLHUP != 0 && p[0].Revents&unix.POLLIN == 0 {
						rerr = io.EOF
						return true
					}
					return n > 0 // nothing more now: back to the caller, or wait for the child
				}
				p := []unix.PollFd{{Fd: int32(k.wfd), Events: unix.POLLOUT}}
				if _, err := unix.Poll(p, -1); err != nil && err != unix.EINTR {
					werr, writing = err, false
				}
			case k.wfd >= 0 && writing && e == unix.EINVAL && n == 0 && !k.spliced:
				k.wfd = -1 // a terminal, a file opened to append: copy from now on
			case k.wfd >= 0 && writing:
				werr, writing = e, false // EPIPE: the reader went away
			default:
				rerr = e
				return true
			}
			if m > 0 && k.wfd >= 0 {
				k.spliced = true
			}
		}
		return true
	})
	if err != nil && rerr == nil {
		rerr = err
	}
	return n, werr, rerr
}

// growOutput enlarges the output's pipe when it is one, as the child's
// (growPipe): a skimmed burst then costs a splice a megabyte.
func (k *skimmer) growOutput() {
	if k.grown || k.wfd < 0 {
		return
	}
	k.grown = true
	var st unix.Stat_t
	if unix.Fstat(k.wfd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFIFO {
		if sz, err := unix.FcntlInt(uintptr(k.wfd), unix.F_GETPIPE_SZ, 0); err == nil && sz < childPipeSize {
			_, _ = unix.FcntlInt(uintptr(k.wfd), unix.F_SETPIPE_SZ, childPipeSize)
		}
	}
}

// threadCPU is the CPU time of the calling thread, 0 when unknown.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}
