package launcher

import (
	"bytes"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// relayBufSize is the most the tap takes of a read at a time (a chunk of
// its queue).
const relayBufSize = 64 << 10

// relayReadSize is the size of one read from the child's output: a quarter
// of the enlarged pipe (childPipeSize), so a burst costs few read(2) and
// write(2) calls and wake-ups. A read returns what is there, so a partial
// line is not held.
const relayReadSize = 256 << 10

// childPipeSize is the size asked for the pipes of the child's output.
const childPipeSize = 1 << 20

// tapQueueLen bounds the tap's queue of copied output: at most
// tapQueueLen chunks (of at most tapBufSize bytes) wait for OnLine. When it
// is full, the relay keeps only the lines the tap must not lose (those
// Config.Shed does not call noise) and sheds the rest; the relay itself
// never waits for the tap.
const tapQueueLen = 16

// tapReserve more chunks of kept lines may wait beyond tapQueueLen: with
// the relay's own buffer, ~2 MiB of lines that are not noise (~15000 WARN
// lines, what a burst with 1 % of them carries in 150 MiB) for a tap that
// gets no CPU for a while. Only past that are such lines lost (counted).
const tapReserve = 16

// tapBufSize holds a whole read and the start of a line carried over from
// the previous one.
const tapBufSize = relayBufSize + MaxLine + 1

// The final drain is bounded: once the child's output has ended, noise
// is shed at once and OnLine gets the kept lines still queued for at most
// tapDrainTime or tapDrainBytes, whichever comes first, but always the
// first tapDrainLines of them (a failing job's last lines, whatever the
// machine's load); the rest is counted as lost. However far behind a burst
// left the tap, ncclrun exits a few milliseconds after its child.
const (
	tapDrainTime  = 5 * time.Millisecond
	tapDrainBytes = 256 << 10
	tapDrainLines = 128
)

// tapPressure is how long noise stays shed after the tap last fell behind.
const tapPressure = 10 * time.Millisecond

// relayNotify copies r to w byte for byte as it arrives: each read(2) is
// written out at once, so a partial line or a `\r` progress bar is not held
// back. A copy of what was read is offered to t (which never blocks). It
// returns at end of file, at EIO (a pty whose other side is closed) or when
// a read deadline set by the supervisor passes. It calls onErr (when not
// nil) once, with the first error writing to w. A write error (EPIPE: the reader of ncclrun's
// output went away) stops the writing but not the reading: the child's
// output is drained and discarded (the tap still gets it), so the child
// never blocks on a full pipe nor dies of SIGPIPE, and runs to its end.
func relayNotify(r *os.File, w io.Writer, s Stream, t *tap, onErr func(Stream, error)) {
	defer r.Close()
	var ts *tapStream
	if t != nil {
		ts = t.stream(s)
		defer ts.finish()
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
			if ts != nil {
				for p := buf[:n]; len(p) > 0; {
					k := min(len(p), relayBufSize)
					ts.offer(p[:k])
					p = p[k:]
				}
			}
		}
		if err != nil {
			return
		}
	}
}

// tapChunk is whole lines of one stream, each ending in a newline.
type tapChunk struct {
	s    Stream
	buf  *[]byte
	n    int
	kept bool // only lines that are not noise (chosen under pressure)
}

// TapStats is what the tap did not deliver to OnLine.
type TapStats struct {
	Dropped int64 // bytes (of shed and lost lines)
	Shed    int64 // noise lines shed under pressure
	Lost    int64 // other lines not delivered (the tap's bounds overflowed)
}

// tap splits a copy of the child's output into lines for a LineFunc on a
// goroutine of its own, behind a bounded queue, so a slow LineFunc never
// slows the relay. Under pressure (the queue more than half full, or
// full) lines that shed calls noise are shed, first by the tap goroutine
// (it stays ahead of a burst at the cost of a prefix test a line) and,
// when the queue is full, by the relay; every other line is kept, within
// bounds that no training job's output reaches.
type tap struct {
	fn   LineFunc
	shed func([]byte) bool
	ch   chan tapChunk
	pool sync.Pool
	done chan struct{}

	mu       sync.Mutex
	leftover []tapChunk // kept lines of streams that ended while the queue was full

	drainTime time.Duration // tapDrainTime; tests that count lines set it longer

	closing atomic.Bool
	full    atomic.Bool // a relay found the queue full since the tap last looked
	dropped atomic.Int64
	nShed   atomic.Int64
	lost    atomic.Int64
}

func newTap(fn LineFunc, shed func([]byte) bool) *tap {
	t := &tap{fn: fn, shed: shed, ch: make(chan tapChunk, tapQueueLen+tapReserve), done: make(chan struct{}), drainTime: tapDrainTime}
	t.pool.New = func() any { b := make([]byte, tapBufSize); return &b }
	go t.consume()
	return t
}

func (t *tap) consume() {
	defer close(t.done)
	var shed, lost, dropped int64 // this goroutine's counts, added to t's at the end
	defer func() { t.nShed.Add(shed); t.lost.Add(lost); t.dropped.Add(dropped) }()
	shedding := false
	var drainStart time.Time
	var drainLines, drainBytes int64
	emit := func(s Stream, line []byte) {
		closing := t.closing.Load() // per line: a chunk taken before the end may be delivered after it
		if (shedding || closing) && t.shed != nil && t.shed(line) {
			shed++
			dropped += int64(len(line)) + 1
			return
		}
		if closing {
			if drainStart.IsZero() {
				drainStart = time.Now()
			}
			if drainLines >= tapDrainLines && (drainBytes >= tapDrainBytes || time.Since(drainStart) >= t.drainTime) {
				lost++
				dropped += int64(len(line)) + 1
				return
			}
			drainLines++
			drainBytes += int64(len(line)) + 1
		}
		t.fn(s, line)
	}
	sp := [3]*lineSplitter{nil, {s: Stdout, emit: emit}, {s: Stderr, emit: emit}}
	// Under pressure (chunks waiting behind the one taken, or the relay
	// found the queue full) noise is shed, and it stays shed for
	// tapPressure after the last sign of it: shedding is a few times
	// faster than the relay, so the queue empties at once, and delivering
	// noise again at the first empty queue would only fill it again. In a
	// burst, the tap's work is then a prefix test a line.
	var lastPressure time.Time
	for c := range t.ch {
		now := time.Now()
		if len(t.ch) >= 1 || t.full.Swap(false) {
			lastPressure = now
		}
		shedding = !c.kept && (now.Sub(lastPressure) < tapPressure || t.closing.Load())
		sp[c.s].feed((*c.buf)[:c.n])
		*c.buf = (*c.buf)[:cap(*c.buf)]
		t.pool.Put(c.buf)
	}
	sp[Stdout].flush()
	sp[Stderr].flush()
}

// stream is the relay side of the tap for one of the child's streams.
func (t *tap) stream(s Stream) *tapStream {
	return &tapStream{t: t, s: s, carry: make([]byte, 0, MaxLine+1)}
}

// close ends the tap after all relays returned and waits until what is
// queued was delivered: noise is shed at once, and kept lines go to OnLine
// within the final drain's bounds (tapDrainTime; the rest is lost and
// counted).
func (t *tap) close() TapStats {
	t.closing.Store(true)
	for _, c := range t.leftover {
		t.ch <- c // the tap sheds and drains at once now
	}
	close(t.ch)
	<-t.done
	return TapStats{Dropped: t.dropped.Load(), Shed: t.nShed.Load(), Lost: t.lost.Load()}
}

// tapStream cuts one stream's output into whole lines for the tap: what
// it queues always ends at a newline, so a chunk the tap cannot take
// costs whole lines, never half of one (the start of a cut line must not
// reach the matcher: "[receive] via NET/IB/0/GDRDMA" cut after "IB/0"
// reads as GPUDirect missing on that connection).
type tapStream struct {
	t     *tap
	s     Stream
	carry []byte  // the line being written: what followed the last newline (at most MaxLine bytes)
	skip  bool    // that line outgrew MaxLine: its start was queued cut, the rest up to its newline is skipped
	kept  *[]byte // lines kept while the queue was full, waiting for room

	shed, lost, dropped int64 // counted by the relay goroutine, added to t's by finish
}

func (ts *tapStream) offer(p []byte) {
	if ts.skip {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			return
		}
		ts.skip = false
		p = p[i+1:]
	}
	j := bytes.LastIndexByte(p, '\n')
	if j < 0 {
		ts.hold(p)
		return
	}
	ts.push(p[:j+1])
	ts.hold(p[j+1:])
}

// hold appends the start of a line to carry; a line longer than MaxLine
// is queued cut to its first MaxLine bytes (as lineSplitter cuts it).
func (ts *tapStream) hold(p []byte) {
	if room := MaxLine - len(ts.carry); len(p) > room {
		ts.carry = append(ts.carry, p[:room]...)
		ts.carry = append(ts.carry, '\n')
		ts.push(nil)
		ts.skip = true
		return
	}
	ts.carry = append(ts.carry, p...)
}

// push queues carry followed by whole (whole lines, or nil when carry
// ends in its own newline) and empties carry.
func (ts *tapStream) push(whole []byte) {
	t := ts.t
	defer func() { ts.carry = ts.carry[:0] }()
	if ts.kept != nil {
		ts.flushKept() // kept lines go first: lines reach OnLine in order
	}
	if ts.kept == nil && len(t.ch) < tapQueueLen {
		b := t.pool.Get().(*[]byte)
		n := copy(*b, ts.carry)
		n += copy((*b)[n:], whole)
		select {
		case t.ch <- tapChunk{s: ts.s, buf: b, n: n}:
			return
		default:
			t.pool.Put(b)
		}
	}
	// The queue is full: keep what is not noise, shed the rest.
	t.full.Store(true)
	if len(ts.carry) > 0 {
		i := bytes.IndexByte(whole, '\n')
		if i >= 0 {
			// The first line is carry and whole's first segment; a line
			// longer than MaxLine is judged by its first MaxLine bytes.
			if room := cap(ts.carry) - 1 - len(ts.carry); room > 0 {
				ts.carry = append(ts.carry, whole[:min(i, room)]...)
			}
			ts.triage(ts.carry)
			whole = whole[i+1:]
		} else { // carry ends in a newline of its own
			ts.triage(ts.carry[:len(ts.carry)-1])
		}
	}
	for len(whole) > 0 {
		i := bytes.IndexByte(whole, '\n')
		if !ts.triage(whole[:i]) {
			// Saturated: no room for kept lines. The rest of the chunk is
			// only counted (shed or lost), not copied.
			for whole = whole[i+1:]; len(whole) > 0; {
				j := bytes.IndexByte(whole, '\n')
				if t.shed != nil && t.shed(whole[:j]) {
					ts.shed++
				} else {
					ts.lost++
				}
				ts.dropped += int64(j) + 1
				whole = whole[j+1:]
			}
			break
		}
		whole = whole[i+1:]
	}
	if ts.kept != nil && len(*ts.kept) >= cap(*ts.kept)/2 {
		// Only well-filled buffers take the reserve's slots, so that its
		// chunks hold what tapReserve says.
		ts.flushKept()
	}
}

// triage keeps line (without its newline) or sheds it; false when it was
// lost instead: no room is left for kept lines.
func (ts *tapStream) triage(line []byte) bool {
	t := ts.t
	if t.shed != nil && t.shed(line) {
		ts.shed++
		ts.dropped += int64(len(line)) + 1
		return true
	}
	if len(line) > MaxLine {
		line = line[:MaxLine]
	}
	if ts.kept != nil && len(*ts.kept)+len(line)+1 > cap(*ts.kept) {
		ts.flushKept()
	}
	if ts.kept == nil {
		b := t.pool.Get().(*[]byte)
		*b = (*b)[:0]
		ts.kept = b
	}
	if len(*ts.kept)+len(line)+1 > cap(*ts.kept) {
		ts.lost++ // the reserve and this buffer are full
		ts.dropped += int64(len(line)) + 1
		return false
	}
	*ts.kept = append(append(*ts.kept, line...), '\n')
	return true
}

// flushKept queues the kept lines if there is room.
func (ts *tapStream) flushKept() {
	b := ts.kept
	if b == nil {
		return
	}
	if len(*b) == 0 {
		ts.kept = nil
		*b = (*b)[:cap(*b)]
		ts.t.pool.Put(b)
		return
	}
	select {
	case ts.t.ch <- tapChunk{s: ts.s, buf: b, n: len(*b), kept: true}:
		ts.kept = nil
	default:
	}
}

// finish queues what is left when the stream ends: kept lines, and a last
// line that had no newline.
func (ts *tapStream) finish() {
	if len(ts.carry) > 0 && !ts.skip {
		ts.carry = append(ts.carry, '\n')
		ts.push(nil)
	}
	ts.flushKept()
	if ts.kept != nil { // no room: close queues it, once the tap drains fast
		ts.t.mu.Lock()
		ts.t.leftover = append(ts.t.leftover, tapChunk{s: ts.s, buf: ts.kept, n: len(*ts.kept), kept: true})
		ts.t.mu.Unlock()
		ts.kept = nil
	}
	ts.t.nShed.Add(ts.shed)
	ts.t.lost.Add(ts.lost)
	ts.t.dropped.Add(ts.dropped)
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
