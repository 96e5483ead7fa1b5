package launcher

import (
	"bytes"
	"io"
	"os"
	"sync/atomic"
	"time"

	"github.com/ncclrun/ncclrun/internal/shown"
)

// relayReadSize is the size of one read from the child's output. A read
// returns what is there, so a partial line is not held.
const relayReadSize = 128 << 10

// The tap's queue is bounded in bytes: tapQueueBytes of chunks wait for
// Tap.Lines, and when they do not fit, the relay sheds the noise of a
// chunk and queues the rest in tapReserveBytes more; past that, lines are
// lost (counted). About 3 MiB in all: a matcher that got no CPU for a
// while, behind a burst of WARN lines, does not take ncclrun past 16 MiB.
const (
	tapQueueBytes   = 2 << 20
	tapReserveBytes = 1 << 20
	// tapQueueLen bounds the number of chunks (a child that writes a line
	// at a time makes small ones), and as many more of the reserve.
	tapQueueLen = 4096
)

// tapCatchUp is how long the tap stays behind after the last sign of it
// (a chunk waiting behind the one taken, or one the relay had to shed):
// shedding noise is many times cheaper than diagnosing it, so the queue
// empties at once, and diagnosing noise again at the first empty queue
// would only fill it again.
const tapCatchUp = 10 * time.Millisecond

// The final drain is bounded: once the child's output has ended, the
// lines still queued go to the tap (noise shed) for at most tapDrainTime,
// but the first tapDrainLines of them always (a failing job's last lines,
// whatever the machine's load); the rest is counted (shed or lost).
// However far behind a burst left the tap, ncclrun exits soon after its
// child.
const (
	tapDrainTime  = 50 * time.Millisecond
	tapDrainLines = 128
)

// relay copies r to w byte for byte as it arrives: each read(2) is
// written out at once, so a partial line or a `\r` progress bar is not
// held back. The whole lines of what was read are queued for t (nil: no
// tap), which never blocks. It returns at end of file, at EIO (a pty whose
// other side is closed) or when a read deadline set by the supervisor
// passes. It calls onErr (when not nil) once, with the first error
// writing to w. A write error (EPIPE: the reader of ncclrun's output went
// away) stops the writing but not the reading: the child's output is
// drained and discarded (the tap still gets it), so the child never
// blocks on a full pipe nor dies of SIGPIPE, and runs to its end.
func relay(r *os.File, w io.Writer, s Stream, t *tap, onErr func(Stream, error)) {
	defer r.Close()
	var ls *lineSplitter
	if t != nil {
		ls = &lineSplitter{t: t, s: s}
		defer ls.finish()
	}
	buf := make([]byte, relayReadSize)
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
			if ls != nil {
				ls.add(buf[:n])
			}
		}
		if err != nil {
			return
		}
	}
}

// lineSplitter cuts one stream's output into chunks of whole lines for
// the tap: a chunk always ends at a newline, so one the tap cannot take
// costs whole lines, never half of one (the start of a cut line must not
// reach the matcher: "[receive] via NET/IB/0/GDRDMA" cut after "IB/0"
// reads as GPUDirect missing on that connection).
type lineSplitter struct {
	t    *tap
	s    Stream
	part []byte // the line being written (what followed the last newline), at most MaxLine bytes
	// cut says the line outgrew MaxLine: long, in part's storage, is then
	// what a terminal shows of it (internal/shown).
	cut  bool
	long shown.Line
}

// add takes what the relay just read.
func (ls *lineSplitter) add(p []byte) {
	j := bytes.LastIndexByte(p, '\n')
	if j < 0 {
		ls.carry(p)
		return
	}
	lines := p[:j+1]
	if ls.cut {
		// The long line ends here.
		i := bytes.IndexByte(lines, '\n')
		ls.long.Add(lines[:i])
		ls.part, lines = ls.long.Buf, lines[i:]
	}
	c := ls.t.chunk(ls.s, len(ls.part)+len(lines))
	c.p = append(append(c.p, ls.part...), lines...)
	ls.part, ls.cut = ls.part[:0], false
	ls.carry(p[j+1:])
	ls.t.push(c)
}

// carry adds p, which holds no newline, to the line being written.
func (ls *lineSplitter) carry(p []byte) {
	if ls.cut {
		ls.long.Add(p)
		return
	}
	if len(p) <= MaxLine-len(ls.part) {
		ls.part = append(ls.part, p...)
		return
	}
	// Too long: from here on long keeps what a terminal shows of it, in
	// part's storage, starting over with part's own bytes.
	ls.cut = true
	ls.long = shown.Line{Max: MaxLine}
	ls.long.Reset(ls.part)
	ls.long.Add(ls.part)
	ls.long.Add(p)
}

// finish queues a last line that had no newline.
func (ls *lineSplitter) finish() {
	if ls.cut {
		ls.part = ls.long.Buf
	}
	if len(ls.part) > 0 || ls.cut {
		c := ls.t.chunk(ls.s, len(ls.part)+1)
		c.p = append(append(c.p, ls.part...), '\n')
		ls.t.push(c)
	}
}

// tapChunk is whole lines of one stream, each ending in a newline.
type tapChunk struct {
	s      Stream
	p      []byte
	buf    *[]byte // the tap's buffer p lies in, nil when p has its own
	sorted bool    // the relay shed its noise: the tap is behind
}

// held is the memory c holds, as the queue's bounds count it.
func (c *tapChunk) held() int64 {
	if c.buf != nil {
		return int64(cap(*c.buf))
	}
	return int64(len(c.p))
}

// tapBufSize is the size of the tap's reused buffers: a read and a
// carried line. A chunk of less than tapBufMin bytes gets a buffer of its
// own size instead, so that the queue's bounds hold the lines of a child
// that writes a line at a time. The buffers wait on a free list of as
// many as the queue and its reserve can hold, not in a sync.Pool: the
// memory limit makes the collector run often during a burst, and a pool
// emptied at each cycle makes reads allocate buffers again, which runs
// the collector more, its assists landing on the relay.
const (
	tapBufSize = relayReadSize + MaxLine + 1
	tapBufMin  = 16 << 10
	tapBufFree = (tapQueueBytes+tapReserveBytes)/tapBufSize + 4
)

// tap hands the child's output to a Tap on a goroutine of its own, behind
// a bounded queue, so a slow Tap never slows the relay: when the queue is
// full the relay sheds the noise of what it read and queues the rest in a
// reserve; past the reserve it counts the lines lost.
type tap struct {
	to     Tap
	ch     chan *tapChunk
	queued atomic.Int64 // bytes held by the chunks in ch
	bufs   chan *[]byte // free buffers of tapBufSize
	done   chan struct{}

	closing   atomic.Bool
	drainTime time.Duration // tapDrainTime; tests that count lines set it longer
	shed      atomic.Int64
	lost      atomic.Int64
}

func newTap(to Tap) *tap {
	t := &tap{to: to, ch: make(chan *tapChunk, 2*tapQueueLen), bufs: make(chan *[]byte, tapBufFree), done: make(chan struct{}), drainTime: tapDrainTime}
	go t.consume()
	return t
}

// chunk returns an empty chunk of s with room for n bytes.
func (t *tap) chunk(s Stream, n int) *tapChunk {
	if n < tapBufMin {
		return &tapChunk{s: s, p: make([]byte, 0, n)}
	}
	var b *[]byte
	select {
	case b = <-t.bufs:
	default:
		nb := make([]byte, 0, tapBufSize)
		b = &nb
	}
	return &tapChunk{s: s, p: (*b)[:0], buf: b}
}

// release gives c's buffer back to the free list (to the collector when
// the list is full).
func (t *tap) release(c *tapChunk) {
	if c.buf != nil {
		select {
		case t.bufs <- c.buf:
		default:
		}
	}
}

// push queues c without waiting: into the queue when it has room, else
// its noise is shed and the rest goes into the reserve, else its lines
// are lost.
func (t *tap) push(c *tapChunk) {
	if t.queued.Load()+c.held() <= tapQueueBytes && len(t.ch) < tapQueueLen && t.send(c) {
		return
	}
	kept, shed := t.to.Shed(c.p)
	t.shed.Add(int64(shed))
	k := &tapChunk{s: c.s, p: kept, buf: c.buf, sorted: true}
	if c.buf != nil && len(kept) < tapBufMin {
		// The reserve holds what it counts, not the read's buffer. The
		// copy is made before the buffer goes back to the free list, where
		// the other stream's relay can take it and read into it at once.
		k.p, k.buf = bytes.Clone(kept), nil
		kept = k.p
		t.release(c)
	}
	if len(kept) == 0 {
		t.release(k)
		return
	}
	if t.queued.Load()+k.held() <= tapQueueBytes+tapReserveBytes && t.send(k) {
		return
	}
	t.lost.Add(int64(bytes.Count(kept, newline)))
	t.release(k)
}

// send queues c if the channel has room.
func (t *tap) send(c *tapChunk) bool {
	t.queued.Add(c.held())
	select {
	case t.ch <- c:
		return true
	default:
		t.queued.Add(-c.held())
		return false
	}
}

var newline = []byte{'\n'}

// cutLong cuts each line of p longer than MaxLine to what a terminal
// shows of it (internal/shown), at most MaxLine bytes, and its newline, in
// place. A read holds at most a few, and
// most hold none: p is looked at a window of MaxLine+1 bytes at a time
// until one has no newline.
func cutLong(p []byte) []byte {
	for r := 0; ; {
		if len(p)-r <= MaxLine {
			return p
		}
		i := bytes.LastIndexByte(p[r:r+MaxLine+1], '\n')
		if i < 0 {
			break
		}
		r += i + 1
	}
	w := 0
	for r := 0; r < len(p); {
		i := bytes.IndexByte(p[r:], '\n')
		end := r + i + 1
		if i > MaxLine {
			s := r + shown.Start(p[r:r+i])
			w += copy(p[w:], p[s:min(s+MaxLine, r+i)])
			p[w] = '\n'
			w++
		} else if w != r {
			w += copy(p[w:], p[r:end])
		} else {
			w = end
		}
		r = end
	}
	return p[:w]
}

// consume hands the queued chunks to the Tap, saying whether it is
// behind the output (tapCatchUp).
func (t *tap) consume() {
	defer close(t.done)
	var lastBehind, drainStart time.Time
	drainLines := 0
	for c := range t.ch {
		now := time.Now()
		if c.sorted || len(t.ch) > 0 {
			lastBehind = now
		}
		p := c.p
		if t.closing.Load() {
			if drainStart.IsZero() {
				drainStart = now
			}
			if drainLines >= tapDrainLines && now.Sub(drainStart) >= t.drainTime {
				kept, shed := t.to.Shed(p)
				t.shed.Add(int64(shed))
				t.lost.Add(int64(bytes.Count(kept, newline)))
				t.queued.Add(-c.held())
				t.release(c)
				continue
			}
		}
		behind := t.closing.Load() || now.Sub(lastBehind) < tapCatchUp
		if len(p) > 0 {
			p = cutLong(p)
			if t.closing.Load() {
				drainLines += bytes.Count(p, newline)
			}
			t.shed.Add(int64(t.to.Lines(c.s, p, behind)))
		}
		t.queued.Add(-c.held())
		t.release(c)
	}
}

// close ends the tap after all relays returned and waits until what is
// queued was handed over, within the final drain's bounds; it returns the
// lines shed and lost.
func (t *tap) close() (shed, lost int64) {
	t.closing.Store(true)
	close(t.ch)
	<-t.done
	return t.shed.Load(), t.lost.Load()
}
