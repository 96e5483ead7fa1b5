package launcher

import (
	"bytes"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// relayBufSize is what a test or benchmark writes into the child's pipe
// at a time: a default pipe's worth.
const relayBufSize = 64 << 10

// relayReadSize is the size of one read from the child's output: a quarter
// of the enlarged pipe (childPipeSize), so a burst costs few read(2) and
// write(2) calls and wake-ups. A read returns what is there, so a partial
// line is not held.
const relayReadSize = 256 << 10

// childPipeSize is the size asked for the pipes of the child's output.
const childPipeSize = 1 << 20

// tapReadBufSize is a relay's read buffer when the output is tapped: the
// start of a line carried over from the previous read (at most MaxLine
// bytes and a newline), then one read. The relay reads into it, writes the
// read out, and hands the whole lines in it to the tap as they are: the
// buffer itself is queued, nothing is copied but the carried line.
const tapReadBufSize = MaxLine + 1 + relayReadSize

// tapQueueLen bounds the tap's queue of output: at most tapQueueLen chunks
// of lines wait for OnLine, tapQueueBufs of them at most read buffers
// handed over whole (reads of more than relayBufSize: a burst), the others
// small reads copied into buffers of tapKeptSize (the read buffer stays
// with the relay: an output that comes in reads of 64 KiB or less gets as
// many chunks as before, and does not hold 320 KiB a read). When it is
// full, the relay keeps only the lines the tap must not lose (those
// Config.Shed does not call noise) and sheds the rest; the relay itself
// never waits for the tap.
const (
	tapQueueLen  = 16
	tapQueueBufs = 4
)

// tapReserve more chunks of kept lines (tapKeptSize each) may wait beyond
// tapQueueLen: with the relay's own buffer, ~0.75 MiB of lines that are
// not noise (~5500 WARN lines, what a burst with 1 % of them carries in
// 55 MiB) for a tap that gets no CPU for a while. Only past that are such
// lines lost (counted). It was 16 chunks: a tap behind a burst of WARN
// lines of a million processes (with the matcher's bounded state full)
// then took ncclrun over its 16 MiB; the mixed bursts of make bench lose
// no line with 8, at pipe speed as at 200 MiB/s.
const tapReserve = 8

// tapKeptSize is the size of a buffer of kept lines or of a small read's
// lines (a read of relayBufSize or less); a line cut to MaxLine and its
// newline must fit in one (a review found a 64 KiB buffer lost such a line
// and the rest of its read). It was 128 KiB: behind the WARN burst of a
// million processes the queue then held ~3.5 MiB of them, and ncclrun
// peaked at 15.3-16.4 MiB; with 96 KiB it peaks lower, and the pure WARN
// burst at pipe speed loses as many lines (docs/performance.md, "Eighth
// pass").
const tapKeptSize = 96 << 10

// A kept line is at most MaxLine bytes and its newline.
const _ = uint(tapKeptSize - MaxLine - 1)

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

var newline = []byte{'\n'}

// tapFeedPiece is about how much of a chunk the tap hands to FeedLines at
// a time: a 256 KiB chunk of WARN lines costs the matcher ~0.6 ms, which
// the exit of the child would otherwise wait for beyond the final drain's
// bounds.
const tapFeedPiece = 32 << 10

// The tap's share of a burst is bounded, in bytes and in time: it takes
// the child's output at up to tapRate after the first tapBurst bytes of a
// burst, and while its goroutine has worked at most tapShare of the time
// since the output began, after the first tapShareBurst of work (a burst
// of WARN lines costs the matcher several times what INFO lines cost).
// Work on a large chunk is counted in the CPU time of the tap's thread,
// so that a loaded machine does not shrink the share. Beyond the bounds
// the relay moves the output past the tap (skim), with splice(2) where
// its destination allows: the bytes go from the child's pipe to ncclrun's
// output without a copy through ncclrun, and the tap never sees them
// (they are counted as unread). A training job prints well below both
// bounds (a 64-rank job's NCCL INFO start-up is a few tens of MB; the
// bench's mixed burst at 200 MiB/s is read whole, with the tap busy about
// a fifth of the time): only an output faster than that, such as `cat` of
// a saved log, is skimmed, so that relaying it costs about what `cat`
// costs instead of the tap's scan of every byte. The last lines of a
// burst, which hold a failure, reach the tap: the budget refills as soon
// as the output slows down.
const (
	tapRate       = 256 << 20 // bytes a second
	tapBurst      = 8 << 20
	tapShare      = 0.3
	tapShareBurst = 20 * time.Millisecond
	// tapPause is a pause in the output that ends a burst: what follows
	// it reaches the tap, whatever its budget (a skim that waited this
	// long for the child).
	tapPause = 500 * time.Microsecond
)

// tapCPUChunk is the size of a chunk from which the tap's work on it is
// charged in CPU time (two clock_gettime(2) calls) rather than in the
// time that passed.
const tapCPUChunk = 16 << 10

// tapBudget is two token buckets, of the bytes the tap may still read and
// of the time it may still spend, shared by a tap's streams.
type tapBudget struct {
	mu          sync.Mutex
	rate, burst int64 // bytes a second and bucket size
	bytes       int64
	busy        time.Duration // tap work left in the time bucket
	forgiven    bool          // the next read is the tap's (forgive)
	seen        int64         // tap.busy when last looked at
	last        time.Time
}

func newTapBudget(rate, burst int64) *tapBudget {
	return &tapBudget{rate: rate, burst: burst, bytes: burst, busy: tapShareBurst}
}

// allows reports whether the tap may take the next read, given how long
// (busy, in ns) its goroutine has worked so far, refilling the buckets
// for the time since the last call.
func (b *tapBudget) allows(now time.Time, busy int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.last.IsZero() {
		if d := now.Sub(b.last); d > 0 {
			b.bytes = min(b.burst, b.bytes+int64(float64(d)*float64(b.rate)/float64(time.Second)))
			b.busy = min(tapShareBurst, b.busy+time.Duration(float64(d)*tapShare))
		}
	}
	b.busy -= time.Duration(busy - b.seen)
	b.seen = busy
	b.last = now
	if b.forgiven {
		b.forgiven = false // one read, what it owes still owed
		return true
	}
	return b.bytes > 0 && b.busy > 0
}

// forgive lets the tap take the next read whatever it owes (and it still
// owes it: a writer that pauses often gets a read a pause, not the whole
// share back): the output paused for tapPause.
func (b *tapBudget) forgive() {
	b.mu.Lock()
	b.forgiven = true
	b.mu.Unlock()
}

// spend takes n bytes read for the tap.
func (b *tapBudget) spend(n int) {
	b.mu.Lock()
	b.bytes -= int64(n)
	b.mu.Unlock()
}

// tapPressure is how long noise stays shed after the tap last fell behind.
const tapPressure = 10 * time.Millisecond

// relayNotify copies r to w byte for byte as it arrives: each read(2) is
// written out at once, so a partial line or a `\r` progress bar is not held
// back. The whole lines of what was read are offered to t (which never
// blocks). It returns at end of file, at EIO (a pty whose other side is
// closed) or when a read deadline set by the supervisor passes. It calls
// onErr (when not nil) once, with the first error writing to w. A write
// error (EPIPE: the reader of ncclrun's output went away) stops the writing
// but not the reading: the child's output is drained and discarded (the
// tap still gets it), so the child never blocks on a full pipe nor dies of
// SIGPIPE, and runs to its end. Nothing read is written or offered before
// gate (when not nil) is closed.
func relayNotify(r *os.File, w io.Writer, s Stream, t *tap, onErr func(Stream, error), gate <-chan struct{}) {
	defer r.Close()
	var ts *tapStream
	var plain []byte
	if t != nil {
		ts = t.stream(s)
		defer ts.finish()
	} else {
		plain = make([]byte, relayReadSize)
	}
	var sk *skimmer
	if ts != nil && t.budget != nil {
		if sk = newSkimmer(r, w); sk != nil {
			sk.waiting = t.skimWaiting
		}
	}
	passGate := func() { // before the first byte is passed on
		if gate != nil {
			<-gate
			gate = nil
		}
	}
	writing := true
	tail := false // a skim left the end of what it skimmed to the next read
	for {
		if sk != nil && !tail && !t.budget.allows(time.Now(), t.busy.Load()) {
			// Past the tap's share of a burst: move what is there
			// without it, but its end.
			passGate()
			n, waited, werr, err := sk.skim(writing)
			if n > 0 {
				ts.gap(n)
			}
			tail = waited == 0
			if waited > 0 && waited >= t.pause {
				// The output paused: the burst is over, and what comes
				// now (a failure) is the tap's, whatever it owes.
				t.budget.forgive()
			}
			if werr != nil && writing {
				writing = false
				if onErr != nil {
					onErr(s, werr)
				}
			}
			if err != nil {
				return
			}
			continue
		}
		tail = false
		buf := plain
		if ts != nil {
			buf = (*ts.cur)[ts.c : ts.c+relayReadSize]
		}
		n, err := r.Read(buf)
		if sk != nil {
			t.budget.spend(n)
		}
		if n > 0 {
			passGate()
			if writing {
				if _, werr := w.Write(buf[:n]); werr != nil {
					writing = false
					if onErr != nil {
						onErr(s, werr)
					}
				}
			}
			if ts != nil {
				ts.offer(n)
			}
		}
		if err != nil {
			return
		}
	}
}

// tapChunk is whole lines of one stream, each ending in a newline, in buf.
type tapChunk struct {
	s    Stream
	buf  *[]byte // a relay's read buffer (back to t.reads), or kept lines (back to t.kept)
	p    []byte  // the lines, in *buf
	kept bool    // only lines that are not noise (chosen under pressure)
	// small: buf is a copy of a small read's lines (back to t.kept)
	small bool
	// burst: the read brought more than a default pipe holds (relayBufSize),
	// so the child writes faster than it is relayed.
	burst bool
}

// TapStats is what the tap did not deliver to OnLine.
type TapStats struct {
	Dropped int64 // bytes (of shed and lost lines)
	Shed    int64 // noise lines shed under pressure
	Lost    int64 // other lines not delivered (the tap's bounds overflowed)
	Unread  int64 // bytes of Dropped skimmed past the tap unread (tapBudget)
}

// tap splits a copy of the child's output into lines for a LineFunc on a
// goroutine of its own, behind a bounded queue, so a slow LineFunc never
// slows the relay. Under pressure (the queue more than half full, or
// full) lines that shed calls noise are shed, first by the tap goroutine
// (it stays ahead of a burst at the cost of a prefix test a line) and,
// when the queue is full, by the relay; every other line is kept, within
// bounds that no training job's output reaches.
type tap struct {
	fn        LineFunc
	shed      func([]byte) bool
	shedLines func([]byte, func([]byte)) (int, int) // Config.ShedLines: shed's verdicts for a chunk at once
	feedLines func(Stream, []byte, bool) (int, int) // Config.FeedLines: a chunk delivered at once
	ch        chan tapChunk
	reads     sync.Pool    // read buffers, tapReadBufSize
	kept      sync.Pool    // buffers of kept lines and of small reads' lines, tapKeptSize
	bufsOut   atomic.Int32 // read buffers in the queue
	done      chan struct{}

	mu       sync.Mutex
	leftover []tapChunk // kept lines of streams that ended while the queue was full

	drainTime time.Duration // tapDrainTime; tests that count lines set it longer
	// budget bounds what the tap reads of a burst (nil: it reads
	// everything); busy is how long consume has worked, in ns.
	budget *tapBudget
	busy   atomic.Int64
	pause  time.Duration // tapPause
	// skimWaiting, a test's, is called when a skim is about to wait for
	// the child.
	skimWaiting func()

	closing atomic.Bool
	full    atomic.Bool // a relay found the queue full since the tap last looked
	dropped atomic.Int64
	nShed   atomic.Int64
	lost    atomic.Int64
	unread  atomic.Int64
}

func newTap(fn LineFunc, shed func([]byte) bool, shedLines func([]byte, func([]byte)) (int, int), feedLines func(Stream, []byte, bool) (int, int)) *tap {
	t := &tap{fn: fn, shed: shed, shedLines: shedLines, feedLines: feedLines, ch: make(chan tapChunk, tapQueueLen+tapReserve), done: make(chan struct{}), drainTime: tapDrainTime, budget: newTapBudget(tapRate, tapBurst), pause: tapPause}
	if shed == nil {
		t.shedLines, t.feedLines = nil, nil
	}
	t.reads.New = func() any { b := make([]byte, tapReadBufSize); return &b }
	t.kept.New = func() any { b := make([]byte, 0, tapKeptSize); return &b }
	go t.consume()
	return t
}

func (t *tap) consume() {
	defer close(t.done)
	var shed, lost, dropped int64 // this goroutine's counts, added to t's at the end
	defer func() { t.nShed.Add(shed); t.lost.Add(lost); t.dropped.Add(dropped) }()
	var drainStart time.Time
	var drainLines, drainBytes int64
	drained := false // the final drain's bounds were reached: every line from now on is lost
	var s Stream     // the stream of the chunk being delivered
	deliver := func(line []byte) {
		if len(line) > MaxLine {
			line = line[:MaxLine] // a long line within one read
		}
		if t.closing.Load() { // per line: a chunk taken before the end may be delivered after it
			if drainStart.IsZero() {
				drainStart = time.Now()
			}
			if drained || drainLines >= tapDrainLines && (drainBytes >= tapDrainBytes || time.Since(drainStart) >= t.drainTime) {
				drained = true
				lost++
				dropped += int64(len(line)) + 1
				return
			}
			drainLines++
			drainBytes += int64(len(line)) + 1
		}
		t.fn(s, line)
	}
	// Under pressure (a read of more than relayBufSize, chunks waiting
	// behind the one taken, or the relay found the queue full) noise is
	// shed, and it stays shed for tapPressure after the last sign of it:
	// shedding is a few times faster than the relay, so the queue empties
	// at once, and delivering noise again at the first empty queue would
	// only fill it again. In a burst, the tap's work is then a newline
	// search and a prefix test a line, in one call a chunk (shedLines), or
	// what feedLines does with the chunk (a matcher's vector scan), which
	// also takes the chunks that are not shed, save in the final drain.
	var lastPressure time.Time
	for c := range t.ch {
		now := time.Now()
		var cpu0 time.Duration
		if len(c.p) >= tapCPUChunk {
			cpu0 = threadCPU()
		}
		if c.burst || len(t.ch) >= 1 || t.full.Swap(false) {
			lastPressure = now
		}
		s = c.s
		shedding := !c.kept && t.shed != nil && (now.Sub(lastPressure) < tapPressure || t.closing.Load())
		p := c.p
		if t.feedLines != nil {
			// A piece at a time, so that the end of the output finds the
			// rest of the chunk for the final drain's bounds; noise is
			// shed only under pressure.
			for len(p) > 0 && !t.closing.Load() {
				k := len(p)
				if k > tapFeedPiece {
					if i := bytes.IndexByte(p[tapFeedPiece:], '\n'); i >= 0 {
						k = tapFeedPiece + i + 1
					}
				}
				n, size := t.feedLines(s, p[:k], shedding)
				shed += int64(n)
				dropped += int64(size)
				p = p[k:]
			}
		}
		switch {
		case len(p) == 0: // fed whole
		case drained && c.kept:
			// Kept lines are not noise: all of them are lost, counted at
			// once (the final drain must not cost a step a line).
			lost += int64(bytes.Count(p, newline))
			dropped += int64(len(p))
		case shedding && t.shedLines != nil:
			n, size := t.shedLines(p, deliver)
			shed += int64(n)
			dropped += int64(size)
		default:
			for len(p) > 0 {
				i := bytes.IndexByte(p, '\n')
				line := p[:i]
				p = p[i+1:]
				if len(line) > MaxLine {
					line = line[:MaxLine]
				}
				if t.shed != nil && (shedding || t.closing.Load()) && t.shed(line) {
					shed++
					dropped += int64(len(line)) + 1
					continue
				}
				deliver(line)
			}
		}
		if c.kept || c.small {
			*c.buf = (*c.buf)[:0]
			t.kept.Put(c.buf)
		} else {
			t.reads.Put(c.buf)
			t.bufsOut.Add(-1)
		}
		d := time.Since(now)
		if cpu0 > 0 {
			// The thread's CPU time, not the time that passed: on a
			// loaded machine the tap is not charged for waiting to run.
			// A goroutine that moved to another thread meanwhile gets a
			// meaningless difference: the time that passed bounds it.
			if c := threadCPU() - cpu0; c >= 0 && c < d {
				d = c
			}
		}
		t.busy.Add(int64(d))
	}
}

// stream is the relay side of the tap for one of the child's streams.
func (t *tap) stream(s Stream) *tapStream {
	return &tapStream{t: t, s: s, cur: t.reads.Get().(*[]byte)}
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
	return TapStats{Dropped: t.dropped.Load(), Shed: t.nShed.Load(), Lost: t.lost.Load(), Unread: t.unread.Load()}
}

// tapStream cuts one stream's output into whole lines for the tap: what
// it queues always ends at a newline, so a chunk the tap cannot take
// costs whole lines, never half of one (the start of a cut line must not
// reach the matcher: "[receive] via NET/IB/0/GDRDMA" cut after "IB/0"
// reads as GPUDirect missing on that connection).
//
// The relay reads into (*cur)[c:]: the first c bytes are the line being
// written (what followed the last newline), or, when skip is set, the
// first MaxLine bytes of a line that outgrew MaxLine and a newline.
type tapStream struct {
	t     *tap
	s     Stream
	cur   *[]byte // the relay's read buffer (tapReadBufSize)
	spare *[]byte // the next one, when the tap did not take the last
	c     int     // bytes carried at its start
	skip  bool    // the carried line outgrew MaxLine: the rest up to its newline is skipped
	// skipGap: skip follows bytes skimmed past the tap (gap): what it
	// skips is counted as dropped.
	skipGap bool
	kept    *[]byte // lines kept while the queue was full, waiting for room

	shed, lost, dropped, unread int64 // counted by the relay goroutine, added to t's by finish
}

// gap records n bytes skimmed past the tap: the line they cut is not
// delivered, neither its start (carried) nor its rest up to the next
// newline.
func (ts *tapStream) gap(n int) {
	c := ts.c
	if ts.skip && !ts.skipGap && c > 0 {
		c-- // the newline cutLong put after a long line's first MaxLine bytes
	}
	ts.dropped += int64(c + n)
	ts.unread += int64(n)
	ts.c = 0
	ts.skip, ts.skipGap = true, true
}

// offer takes the n bytes the relay just read into (*cur)[c:].
func (ts *tapStream) offer(n int) {
	b := *ts.cur
	end := ts.c + n
	cut := ts.skip
	if cut {
		i := bytes.IndexByte(b[ts.c:end], '\n')
		if i < 0 {
			if ts.skipGap {
				ts.dropped += int64(n)
			}
			return // still inside the long line: the read is dropped, the cut start stays
		}
		if ts.skipGap {
			ts.dropped += int64(i + 1)
		}
		ts.skip, ts.skipGap = false, false
		end = ts.c + copy(b[ts.c:], b[ts.c+i+1:end]) // rare: a line over MaxLine
	}
	// The carried bytes hold no newline but the cut line's own.
	j := bytes.LastIndexByte(b[ts.c:end], '\n')
	if j >= 0 {
		j += ts.c
	} else if cut {
		j = ts.c - 1
	}
	if j < 0 { // no whole line yet
		ts.c = end
		ts.cutLong()
		return
	}
	// The tail (the start of the next line) moves to the front of the next
	// read buffer before the lines are queued: once queued, the buffer is
	// the tap's, which may hand it to the other stream's relay.
	tail := b[j+1 : end]
	next := ts.spare
	if next == nil {
		next = ts.t.reads.Get().(*[]byte)
	}
	ts.spare = nil
	ts.c = copy(*next, tail)
	if ts.push(b[:j+1], n > relayBufSize) {
		ts.cur = next
	} else { // the lines were triaged here: the buffer stays this relay's
		ts.spare = next
		copy(b, tail)
	}
	ts.cutLong()
}

// cutLong cuts a carried line longer than MaxLine to its first MaxLine
// bytes and a newline (as OnLine gets it); the rest up to its newline is
// skipped.
func (ts *tapStream) cutLong() {
	if ts.c > MaxLine {
		(*ts.cur)[MaxLine] = '\n'
		ts.c = MaxLine + 1
		ts.skip = true
	}
}

// push queues lines (whole lines in *cur; burst when they came with a
// read of more than relayBufSize, handed over in *cur, else copied), true
// when the tap took the buffer; else the lines were copied, or the lines
// that are not noise were copied into kept and the rest shed.
func (ts *tapStream) push(lines []byte, burst bool) bool {
	t := ts.t
	if ts.kept != nil {
		ts.flushKept() // kept lines go first: lines reach OnLine in order
	}
	if ts.kept == nil && len(t.ch) < tapQueueLen {
		if !burst && len(lines) <= tapKeptSize {
			b := t.kept.Get().(*[]byte)
			*b = append((*b)[:0], lines...)
			select {
			case t.ch <- tapChunk{s: ts.s, buf: b, p: *b, small: true}:
				return false
			default:
				t.kept.Put(b)
			}
		} else if t.bufsOut.Add(1) <= tapQueueBufs {
			select {
			case t.ch <- tapChunk{s: ts.s, buf: ts.cur, p: lines, burst: burst}:
				return true
			default:
			}
			t.bufsOut.Add(-1)
		} else {
			t.bufsOut.Add(-1)
		}
	}
	// The queue is full: keep what is not noise, shed the rest.
	t.full.Store(true)
	for len(lines) > 0 {
		i := bytes.IndexByte(lines, '\n')
		line := lines[:i]
		lines = lines[i+1:]
		if !ts.triage(line) {
			// Saturated: no room for kept lines. The rest is only
			// counted (shed or lost), not copied.
			for len(lines) > 0 {
				j := bytes.IndexByte(lines, '\n')
				if t.shed != nil && t.shed(lines[:j]) {
					ts.shed++
				} else {
					ts.lost++
				}
				ts.dropped += int64(j) + 1
				lines = lines[j+1:]
			}
			break
		}
	}
	if ts.kept != nil && len(*ts.kept) >= cap(*ts.kept)/2 {
		// Only well-filled buffers take the reserve's slots, so that its
		// chunks hold what tapReserve says.
		ts.flushKept()
	}
	return false
}

// triage keeps line (without its newline) or sheds it; false when it was
// lost instead: no room is left for kept lines. A line longer than MaxLine
// is judged and kept by its first MaxLine bytes.
func (ts *tapStream) triage(line []byte) bool {
	t := ts.t
	if len(line) > MaxLine {
		line = line[:MaxLine]
	}
	if t.shed != nil && t.shed(line) {
		ts.shed++
		ts.dropped += int64(len(line)) + 1
		return true
	}
	if ts.kept != nil && len(*ts.kept)+len(line)+1 > cap(*ts.kept) {
		ts.flushKept()
	}
	if ts.kept == nil {
		ts.kept = t.kept.Get().(*[]byte)
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
		ts.t.kept.Put(b)
		return
	}
	select {
	case ts.t.ch <- tapChunk{s: ts.s, buf: b, p: *b, kept: true}:
		ts.kept = nil
	default:
	}
}

// finish queues what is left when the stream ends: kept lines, and a last
// line that had no newline.
func (ts *tapStream) finish() {
	if ts.c > 0 {
		if !ts.skip {
			(*ts.cur)[ts.c] = '\n'
			ts.c++
		}
		if !ts.push((*ts.cur)[:ts.c], false) {
			ts.t.reads.Put(ts.cur)
		}
	} else {
		ts.t.reads.Put(ts.cur)
	}
	ts.cur = nil
	if ts.spare != nil {
		ts.t.reads.Put(ts.spare)
		ts.spare = nil
	}
	ts.flushKept()
	if ts.kept != nil { // no room: close queues it, once the tap drains fast
		ts.t.mu.Lock()
		ts.t.leftover = append(ts.t.leftover, tapChunk{s: ts.s, buf: ts.kept, p: *ts.kept, kept: true})
		ts.t.mu.Unlock()
		ts.kept = nil
	}
	ts.t.nShed.Add(ts.shed)
	ts.t.lost.Add(ts.lost)
	ts.t.dropped.Add(ts.dropped)
	ts.t.unread.Add(ts.unread)
}
