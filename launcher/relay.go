package launcher

import (
	"bytes"
	"io"
	"os"
	"sync"
	"sync/atomic"
)

// relayBufSize is the size of one read from the child's output: a whole
// default pipe (64 KiB), so a full pipe is emptied in one read(2) and one
// write(2). A read returns what is there, so a partial line is not held.
// (256 KiB with a pipe enlarged to match measured slower.)
const relayBufSize = 64 << 10

// tapQueueLen bounds the tap: at most tapQueueLen chunks of relayBufSize
// bytes (2 MiB) wait for OnLine. When the queue is full the chunk is
// dropped from the tap, never from the relay.
const tapQueueLen = 32

// relay copies r to w byte for byte as it arrives: each read(2) is written
// out at once, so a partial line or a `\r` progress bar is not held back.
// A copy of what was read is offered to t (which never blocks). relay
// returns at end of file, at EIO (a pty whose other side is closed) or
// when a read deadline set by the supervisor passes.
func relay(r *os.File, w io.Writer, s Stream, t *tap) { relayNotify(r, w, s, t, nil) }

// relayNotify is relay that calls onErr (when not nil) once, with the
// first error writing to w. A write error (EPIPE: the reader of ncclrun's
// output went away) stops the writing but not the reading: the child's
// output is drained and discarded (the tap still gets it), so the child
// never blocks on a full pipe nor dies of SIGPIPE, and runs to its end.
func relayNotify(r *os.File, w io.Writer, s Stream, t *tap, onErr func(Stream, error)) {
	defer r.Close()
	buf := make([]byte, relayBufSize)
	writing := true
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if writing {
				if _, werr := w.Write(buf[:n]); werr != nil {
					writing = false
					if onErr != nil {
						onErr(s, werr)
					}
				}
			}
			if t != nil {
				t.offer(s, buf[:n])
			}
		}
		if err != nil {
			return
		}
	}
}

type tapChunk struct {
	s   Stream
	buf *[]byte
	n   int
	gap bool // data of this stream was dropped before this chunk
}

// tap splits a copy of the child's output into lines for a LineFunc on a
// goroutine of its own, behind a bounded queue, so a slow LineFunc never
// slows the relay: what does not fit in the queue is dropped from the tap
// (counted in dropped) and the line it fell into is not delivered whole.
type tap struct {
	ch      chan tapChunk
	pool    sync.Pool
	dropped atomic.Int64
	gaps    [3]atomic.Bool
	done    chan struct{}
}

func newTap(fn LineFunc) *tap {
	t := &tap{ch: make(chan tapChunk, tapQueueLen), done: make(chan struct{})}
	t.pool.New = func() any { b := make([]byte, relayBufSize); return &b }
	go func() {
		defer close(t.done)
		sp := [3]*lineSplitter{nil, {s: Stdout, emit: fn}, {s: Stderr, emit: fn}}
		for c := range t.ch {
			l := sp[c.s]
			if c.gap {
				l.gap()
			}
			l.feed((*c.buf)[:c.n])
			t.pool.Put(c.buf)
		}
		sp[Stdout].flush()
		sp[Stderr].flush()
	}()
	return t
}

// offer queues a copy of p, or drops it when the queue is full. A full
// queue is seen before copying: a tap that fell behind costs the relay no
// copy of what it cannot take.
func (t *tap) offer(s Stream, p []byte) {
	for len(p) > 0 {
		if len(t.ch) == cap(t.ch) {
			t.dropped.Add(int64(len(p)))
			t.gaps[s].Store(true)
			return
		}
		b := t.pool.Get().(*[]byte)
		n := copy(*b, p)
		p = p[n:]
		c := tapChunk{s: s, buf: b, n: n, gap: t.gaps[s].Swap(false)}
		select {
		case t.ch <- c:
		default:
			t.pool.Put(b)
			t.dropped.Add(int64(n))
			t.gaps[s].Store(true)
		}
	}
}

// close ends the tap after all relays returned and waits until every
// queued line was delivered.
func (t *tap) close() int64 {
	close(t.ch)
	<-t.done
	return t.dropped.Load()
}

// lineSplitter cuts a byte stream into lines with bounded memory: at most
// MaxLine bytes are held. A longer line is delivered cut to its first
// MaxLine bytes as soon as it grows past them, and the rest up to the next
// newline is skipped.
type lineSplitter struct {
	s    Stream
	emit LineFunc
	buf  []byte
	skip bool // inside a line that was already delivered cut
}

func (l *lineSplitter) feed(p []byte) {
	if l.buf == nil {
		l.buf = make([]byte, 0, MaxLine) // never grows: appends stop at MaxLine
	}
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		seg := p
		if i >= 0 {
			seg, p = p[:i], p[i+1:]
		} else {
			p = nil
		}
		if !l.skip {
			switch room := MaxLine - len(l.buf); {
			case i >= 0 && len(l.buf) == 0 && len(seg) <= MaxLine:
				l.emit(l.s, seg) // whole line in one chunk: no copy
			case len(seg) > room:
				l.buf = append(l.buf, seg[:room]...)
				l.emit(l.s, l.buf)
				l.buf = l.buf[:0]
				l.skip = true
			default:
				l.buf = append(l.buf, seg...)
				if i >= 0 {
					l.emit(l.s, l.buf)
					l.buf = l.buf[:0]
				}
			}
		}
		if i >= 0 {
			l.skip = false
		}
	}
}

// gap records that bytes were lost before the next feed: the line the gap
// cut into is not what the child wrote, so its held start is dropped and
// the rest of it (up to the next newline) is skipped. Delivering the start
// would let the matcher read a made-up line: a healthy
// "[receive] via NET/IB/0/GDRDMA" cut after "IB/0" reads as GPUDirect
// missing on that connection.
func (l *lineSplitter) gap() {
	l.buf = l.buf[:0]
	l.skip = true
}

// flush delivers a last line that had no newline.
func (l *lineSplitter) flush() {
	if len(l.buf) > 0 && !l.skip {
		l.emit(l.s, l.buf)
	}
	l.buf = l.buf[:0]
	l.skip = false
}
