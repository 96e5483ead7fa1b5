package launcher

import (
	"errors"
	"fmt"
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
	scratch []byte  // for a destination splice cannot write to, or after a write error
	spliced bool    // a splice to the output worked
	waiting func()  // a test's: called when skim is about to wait for the child
	splicer Splicer // w, when it is one: splices run through its Spliced
	grown   bool    // growOutput was called
	outPipe bool    // the output is a pipe (growOutput may enlarge it)
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
	f, ok := w.(*os.File)
	if sp, isSplicer := w.(Splicer); isSplicer {
		f, ok = sp.SpliceFile(), true
		k.splicer = sp
	}
	if ok && f != nil {
		if wc, err := f.SyscallConn(); err == nil {
			_ = wc.Control(func(fd uintptr) {
				// Not into a regular file: splice(2) moves its offset
				// without the lock write(2) takes, so the other stream's
				// writes to the same file (`> log 2>&1`) would overwrite
				// these.
				var ost unix.Stat_t
				if unix.Fstat(int(fd), &ost) == nil {
					switch ost.Mode & unix.S_IFMT {
					case unix.S_IFIFO, unix.S_IFSOCK, unix.S_IFCHR:
						k.wfd = int(fd)
					}
					k.outPipe = ost.Mode&unix.S_IFMT == unix.S_IFIFO
				}
			})
		}
	}
	return k
}

// skimTail is about how much of what the child's pipe holds a skim leaves
// for the read that follows it: a page, and the partly filled last one
// (so that the splice moves whole pages). The tap reads the end of every
// skimmed stretch: it learns where the line the stretch cut ends, so the
// next one reaches it whole, and it sees the last lines before each pause
// in the output.
const skimTail = 4096

// skimMax is how much one skim moves at most before the caller asks the
// tap's budget again.
const skimMax = 4 << 20

// skim moves what the child has written (waiting for some, as a read
// does) to the output, or discards it when writing is false, but the last
// skimTail or so bytes, which the caller reads next (through the tap).
// When it had to wait for the child, it returns as soon as the child wrote
// again, with nothing moved and how long it waited, so that the caller asks
// the budget again: what follows a pause in the output (the failure after
// a burst) is the tap's. It returns how many bytes it moved (0 after a
// wait, or when the pipe held no more than the tail), the first write
// error (writing stops there: the caller reports it) and the read side's
// end (io.EOF, or a passed deadline).
func (k *skimmer) skim(writing bool) (n int, waited time.Duration, werr, rerr error) {
	k.growOutput()
	var since time.Time
	err := k.rc.Read(func(fd uintptr) bool {
		if !since.IsZero() {
			waited = time.Since(since)
			return true
		}
		for n < skimMax {
			a, err := unix.IoctlGetInt(int(fd), unix.TIOCINQ) // FIONREAD: the bytes in the pipe
			if err != nil {
				rerr = err
				return true
			}
			if a == 0 {
				if pipeEnded(int(fd)) {
					rerr = io.EOF
					return true
				}
				if n > 0 {
					return true
				}
				if k.waiting != nil {
					k.waiting()
				}
				since = time.Now()
				return false // wait for the child
			}
			tail := skimTail + a%skimTail
			if a <= tail {
				return true // the caller reads it
			}
			m, e := k.move(int(fd), a-tail, writing)
			n += m
			if e != nil {
				if writing && !errors.Is(e, errSkimRead) {
					werr, writing = e, false // EPIPE: the reader went away; discard from now on
					continue
				}
				rerr = e
				return true
			}
		}
		return true
	})
	if err != nil && rerr == nil {
		rerr = err
	}
	return n, waited, werr, rerr
}

// errSkimRead wraps an error reading the child's pipe.
var errSkimRead = errors.New("read")

// pipeEnded reports whether no writer is left on the pipe fd.
func pipeEnded(fd int) bool {
	p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	_, err := unix.Poll(p, 0)
	return err == nil && p[0].Revents&unix.POLLHUP != 0
}

// move moves up to want bytes, which the child's pipe holds, once: by
// splice into the output, else by a read and a write (or a read alone when
// writing is false). An error is the output's, or errSkimRead's.
func (k *skimmer) move(fd, want int, writing bool) (int, error) {
	if writing && k.wfd >= 0 {
		var m int64
		var e error
		splice := func() int {
			m0, e0 := unix.Splice(fd, nil, k.wfd, nil, want, unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
			m, e = int64(m0), e0 // int64 or int, by architecture
			return int(m)
		}
		if k.splicer != nil {
			k.splicer.Spliced(splice)
		} else {
			splice()
		}
		switch {
		case e == nil:
			k.spliced = true
			return int(m), nil
		case e == unix.EINTR:
			return 0, nil
		case e == unix.EAGAIN:
			// The output is full (the pipe holds what is asked): wait
			// for room, as a blocking write does.
			p := []unix.PollFd{{Fd: int32(k.wfd), Events: unix.POLLOUT}}
			if _, err := unix.Poll(p, -1); err != nil && err != unix.EINTR {
				return 0, err
			}
			return 0, nil
		case !k.spliced:
			// Refused at once (a terminal: EINVAL; a filter: ENOSYS or
			// EPERM): copy from now on.
			k.wfd = -1
		default:
			return 0, e
		}
	}
	if k.scratch == nil {
		k.scratch = make([]byte, relayReadSize)
	}
	m, e := unix.Read(fd, k.scratch[:min(want, len(k.scratch))])
	switch {
	case e == unix.EINTR || e == unix.EAGAIN:
		return 0, nil
	case e != nil:
		return 0, fmt.Errorf("%w: %w", errSkimRead, e)
	case m <= 0:
		return 0, fmt.Errorf("%w: %w", errSkimRead, io.ErrUnexpectedEOF)
	}
	if writing {
		if _, err := k.w.Write(k.scratch[:m]); err != nil {
			return m, err
		}
	}
	return m, nil
}

// growOutput enlarges the output's pipe when it is one, as the child's
// (growPipe): a skimmed burst then costs a splice a megabyte.
func (k *skimmer) growOutput() {
	if k.grown || k.wfd < 0 {
		return
	}
	k.grown = true
	if k.outPipe {
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
