package diagnosis

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync/atomic"

	"github.com/ncclrun/ncclrun/internal/shown"
)

// FeedReader feeds every line of r to m (lines over MaxLine cut as Feed
// cuts them, shownPart). It returns r's error other than io.EOF, wrapped.
//
// It reads r in chunks and runs m's gram filter over each whole chunk of
// complete lines, not line by line: a window in which a gram occurs
// points at the one line that may match, which is fed to m; the lines
// before it only count. That is what feeding every line does (a line the
// filter rejects changes nothing but m's line count, and a line that
// contains a literal has one of its grams at an even offset of any chunk
// that holds the line, chunkFilter), without finding every line's end and
// calling the matcher for it: most of explain's time on a healthy log.
//
// With more than one CPU, the filter runs on other goroutines than the
// matcher (feedPipe): up to feedWorkers chunks are scanned while the
// lines found in earlier ones are fed, in order. A chunk may then be
// scanned with the filter m had a few chunks earlier, which passes every
// line the current one passes and more (a filter only loses the literals
// of markers seen since, and each filter passes every line that holds
// one of its literals); feeding such a line changes nothing but m's line
// count, as feedAll's hit path documents. TestFeedReaderSameAsLines
// compares both paths with feedLineByLine.
func FeedReader(m *Matcher, r io.Reader) error {
	if m.nofilter {
		return feedLineByLine(m, r)
	}
	return feedChunks(m, r, min(runtime.GOMAXPROCS(0), feedWorkers))
}

// feedChunk is the size of one read: a few lines' worth more than a line
// of MaxLine bytes, so that a full buffer without a newline means a line
// to cut. A log the matcher cannot keep up with (WARN lines of ever new
// processes) fills every job's buffer (six on two cores: 0.75 MiB of
// explain's peak at this size); twice it costs as much again for no
// speed on a healthy log.
const feedChunk = 128 << 10

// feedWorkers is the most goroutines that scan chunks at once: the filter
// is about half of a healthy log's cost, so more than two or three leave
// the matcher's goroutine the bottleneck.
const feedWorkers = 3

// feedJob is one read's complete lines and what the filter found in them.
type feedJob struct {
	buf   []byte // the read buffer: lines (and cut) lie in it
	lines []byte // complete lines, each ending in '\n'
	// head is one line fed before lines: the shown part (shownPart) of a
	// line longer than MaxLine that ended in this read, in headBuf (a
	// job is fed after the reader has moved on).
	head, headBuf []byte
	// cut is one line fed after lines, as it is: the input's last line
	// when it has no newline, cut by shownPart.
	cut []byte
	err error // the error that ended the input (io.EOF too), after this job

	hits []feedHit // the lines of lines in which the filter hit
	tail int       // newlines in lines after the last hit
	// taken is set by whoever scans the job (the parallel path): a
	// worker, which then signals done, or the feeder itself when it gets
	// to the job first.
	taken atomic.Bool
	done  chan struct{}
}

// feedHit is a line of a job's lines that the filter passed: its bounds
// in lines, and how many lines came before it since the previous hit.
type feedHit struct{ before, start, end int }

// scan fills j.hits and j.tail with filter f.
func (j *feedJob) scan(f *gramFilter) {
	j.hits = j.hits[:0]
	j.tail = hitLines(j.lines, func() *gramFilter { return f }, func(before, start, end int) {
		j.hits = append(j.hits, feedHit{before: before, start: start, end: end})
	})
}

// hitLines goes through b, complete lines each ending in '\n', with the
// gram filter that filter returns (asked again after each hit: a
// matcher's loses literals as it is fed): it calls hit with the bounds in
// b of each line in which the filter hits and the number of lines before
// it since the previous one, and returns the number of lines after the
// last. The scan of FeedReader's workers, of its sequential path and of
// FeedChunk.
func hitLines(b []byte, filter func() *gramFilter, hit func(before, start, end int)) (after int) {
	for off := 0; len(b) > 0; {
		f := filter()
		h := f.firstHit(b)
		if h < 0 {
			return bytes.Count(b, newline)
		}
		start := bytes.LastIndexByte(b[:h], '\n') + 1
		end := start + bytes.IndexByte(b[start:], '\n') + 1
		hit(bytes.Count(b[:start], newline), off+start, off+end)
		b, off = b[end:], off+end
	}
	return 0
}

// currentFilter is m's filter as it is now (hitLines's argument).
func (m *Matcher) currentFilter() *gramFilter { return m.wide }

// feedScanned feeds j's head line, what scan found in j, then j's cut line.
func (m *Matcher) feedScanned(j *feedJob) {
	if j.head != nil {
		m.Feed(j.head)
	}
	for _, h := range j.hits {
		m.lineNo += h.before
		m.feedAll(j.lines[h.start:h.end])
	}
	m.lineNo += j.tail
	if j.cut != nil {
		m.Feed(j.cut)
	}
}

// feedChunks is FeedReader with at most workers goroutines scanning (one:
// no other goroutine, the filter m has at each line).
func feedChunks(m *Matcher, r io.Reader, workers int) error {
	var err error
	if workers <= 1 {
		jobs := [2]*feedJob{newFeedJob(), newFeedJob()}
		k := 0
		err = readChunks(r, func() *feedJob { k ^= 1; return jobs[k] }, func(j *feedJob) {
			if j.head != nil {
				m.Feed(j.head)
			}
			m.feedLines(j.lines)
			if j.cut != nil {
				m.Feed(j.cut)
			}
		})
	} else {
		err = newFeedPipe(m, workers).run(r)
	}
	if err == nil || errors.Is(err, io.EOF) {
		return nil
	}
	return fmt.Errorf("read log: %w", err)
}

func newFeedJob() *feedJob {
	return &feedJob{buf: make([]byte, feedChunk), done: make(chan struct{}, 1)}
}

// readChunks reads r into the buffers of the jobs next returns, cuts what
// it read at the last newline (the rest starts the next job's buffer) and
// hands each job with complete lines or a cut line to emit, in order; the
// last one carries r's error (io.EOF at the end). A job next returns is
// not in use by emit's side any more. It returns that error.
func readChunks(r io.Reader, next func() *feedJob, emit func(*feedJob)) error {
	j := next()
	n := 0
	empty := 0 // reads in a row that returned nothing
	long := shown.Line{Max: MaxLine}
	skipping := false // in a line longer than MaxLine: long keeps its shown part
	for {
		k, err := r.Read(j.buf[n:])
		n += k
		if k > 0 || err != nil {
			empty = 0
		} else if empty++; empty >= 100 {
			err = io.ErrNoProgress // as bufio's reader does
		}
		p := j.buf[:n]
		j.head = nil
		if skipping {
			i := bytes.IndexByte(p, '\n')
			if i < 0 {
				long.Add(p)
				p = p[:0]
			} else {
				long.Add(p[:i])
				p, skipping = p[i+1:], false
			}
			if !skipping || err != nil {
				if j.headBuf == nil {
					j.headBuf = make([]byte, 0, MaxLine)
				}
				j.head = append(j.headBuf[:0], long.Buf...)
				j.headBuf, skipping = j.head, false
			}
		}
		end := bytes.LastIndexByte(p, '\n') + 1
		j.lines, j.cut, j.err = p[:end], nil, err
		rest := p[end:]
		if len(rest) > MaxLine && err == nil {
			// A line FeedAll cuts: what it shows is known at its end.
			long.Reset(long.Buf)
			long.Add(rest)
			rest, skipping = rest[:0], true
		} else if err != nil && len(rest) > 0 {
			j.cut, _ = shownPart(rest)
			rest = rest[:0]
		}
		if end == 0 && j.cut == nil && j.head == nil && err == nil {
			n = copy(j.buf, rest) // no complete line yet: read on
			continue
		}
		var nj *feedJob
		if err == nil {
			nj = next()
			n = copy(nj.buf, rest)
		}
		emit(j)
		if err != nil {
			return err
		}
		j = nj
	}
}

// feedPipe is FeedReader's parallel path: a goroutine reads, workers scan,
// and the caller's goroutine feeds the jobs in the order they were read
// (scanning a job itself when no worker has taken it yet).
type feedPipe struct {
	m     *Matcher
	free  chan *feedJob // jobs fed (or never used), for the reader
	work  chan *feedJob // read, for the workers
	order chan *feedJob // read, in order, for the feeder
	// filter is m's filter as of the last job fed, for the workers (a
	// gramFilter is never changed once built).
	filter  atomic.Pointer[gramFilter]
	workers int
}

func newFeedPipe(m *Matcher, workers int) *feedPipe {
	jobs := 2*workers + 2
	p := &feedPipe{m: m, workers: workers, free: make(chan *feedJob, jobs), work: make(chan *feedJob, jobs), order: make(chan *feedJob, jobs)}
	for range jobs {
		p.free <- nil // allocated on first use: a short input needs one or two
	}
	p.filter.Store(m.wide)
	return p
}

func (p *feedPipe) run(r io.Reader) error {
	go func() {
		defer close(p.order)
		defer close(p.work)
		_ = readChunks(r, func() *feedJob {
			if j := <-p.free; j != nil {
				return j
			}
			return newFeedJob()
		}, func(j *feedJob) {
			j.taken.Store(false) // after the read: whoever takes it sees the lines
			// order never blocks (at most cap(free) jobs exist); work may,
			// briefly, while a worker skips the entries of jobs the feeder
			// took (each of which is there once more).
			p.order <- j
			p.work <- j
		})
	}()
	for range p.workers {
		go func() {
			// A job may come by twice (queued again after the feeder took
			// it before this worker did): only the one that takes it scans.
			for j := range p.work {
				if j.taken.CompareAndSwap(false, true) {
					j.scan(p.filter.Load())
					j.done <- struct{}{}
				}
			}
		}()
	}
	var err error
	for j := range p.order {
		// The feeder scans a job no worker has taken yet instead of
		// waiting: it is never idle while there is a chunk to scan.
		if j.taken.CompareAndSwap(false, true) {
			j.scan(p.m.wide)
		} else {
			<-j.done
		}
		p.m.feedScanned(j)
		p.filter.Store(p.m.wide)
		if j.err != nil {
			err = j.err
		}
		p.free <- j
	}
	return err
}

// feedLines feeds b, complete lines each ending in '\n', as FeedAll of
// each would (chunkFilter), with the filter m has at each line: the
// sequential path.
func (m *Matcher) feedLines(b []byte) {
	m.lineNo += hitLines(b, m.currentFilter, func(before, start, end int) {
		m.lineNo += before
		m.feedAll(b[start:end])
	})
}

var newline = []byte{'\n'}

// unseenMarker reports whether line may hold a literal of a marker
// pattern m has not seen yet (the gram filter of those markers passes it):
// a noise line that may be one (NCCL's channel lines carry "via NET/",
// "/GDRDMA") is fed, not shed, so that the markers are seen and leave m's
// filter (FeedChunk would otherwise pass every channel line on to shed for
// ever). The markers' filter is rebuilt when m's is.
func (m *Matcher) unseenMarker(line []byte) bool {
	if m.markerFilterOf != m.filter {
		m.markerFilter = buildGramFilter(m.cat.pats, func(i int) bool { return m.cat.pats[i].Marker && !m.markerDone(i) })
		m.markerFilterOf = m.filter
	}
	return m.markerFilter.mayMatch(line)
}

// FeedChunk feeds p, lines each ending in '\n' (the last may lack it), as
// FeedAll of each line would, save the lines shed (when not nil) calls
// noise and that hold no literal of a marker not seen yet, which are only
// counted: a supervisor behind a burst of output
// feeds it the chunks it cannot afford to feed line by line. It runs m's
// filter over the whole chunk (a vector scan where the CPU has one), so a
// line that cannot change m's result costs a few bytes' worth of it, and
// shed runs only on the lines that may; found gets each line's new
// diagnoses (FeedAll's result, never empty). It returns the number of
// lines shed and their bytes, newlines included. A shed line counts in
// m's line count as a fed one does.
func (m *Matcher) FeedChunk(p []byte, shed func(line []byte) bool, found func([]Diagnosis)) (lines, size int) {
	feed := func(line []byte) {
		if shed != nil && shed(trimEOL(line)) && !m.unseenMarker(line) {
			m.lineNo++
			lines++
			size += len(line)
			return
		}
		if ds := m.feedAll(line); len(ds) > 0 && found != nil {
			found(ds)
		}
	}
	if m.nofilter {
		for len(p) > 0 {
			end := bytes.IndexByte(p, '\n') + 1
			if end == 0 {
				end = len(p)
			}
			feed(p[:end])
			p = p[end:]
		}
		return lines, size
	}
	end := bytes.LastIndexByte(p, '\n') + 1
	b, tail := p[:end], p[end:]
	m.lineNo += hitLines(b, m.currentFilter, func(before, start, end int) {
		m.lineNo += before
		feed(b[start:end])
	})
	if len(tail) > 0 {
		if m.wide.mayMatch(tail) {
			feed(tail)
		} else {
			m.lineNo++
		}
	}
	return lines, size
}
