package diagnosis

import (
	"io"
	"sync"
)

// Watch diagnoses a command's output while it runs: its feeders (the
// output's tap, other sources of NCCL lines) hand it chunks of whole lines
// from goroutines of their own, and it writes each diagnosis to w as it is
// found (Message), except those the catalog holds back for the end
// (HeldBack): PyTorch's DistBackendError on stderr often arrives before the
// WARN that names the cause on stdout.
//
// The matcher is built on the first line, not before: building the
// shipped catalog's matcher costs milliseconds, which a command that
// prints nothing never pays and which otherwise overlaps the command's own
// start-up instead of delaying it. A Watch that saw no line has no
// diagnosis.
type Watch struct {
	w       io.Writer
	facts   Facts
	found   func(Diagnosis) string
	mu      sync.Mutex // the feeders' goroutines; it also orders Result after them
	m       *Matcher
	written map[string]bool
	hang    *HangScan // ScanHangs; nil: not looked for
	// said are the diagnoses written, as written, in order: what was
	// said while the command ran is never dropped from Result.
	said []Diagnosis
}

// NewWatch is a Watch that matches with facts and writes to w. found, when
// not nil, is told each diagnosis written, under the Watch's lock, and what
// it returns is written after it.
func NewWatch(facts Facts, w io.Writer, found func(Diagnosis) string) *Watch {
	return &Watch{w: w, facts: facts, found: found, written: map[string]bool{}}
}

// Feed matches a chunk of whole lines at once: the matcher skips the lines
// that cannot change its result with one scan of the chunk and, when
// behind, sheds the noise among the others (Noise; not asked of each line
// of a chunk that holds none). It returns how many lines were shed.
func (w *Watch) Feed(p []byte, behind bool) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	var noise func([]byte) bool
	if behind && !noiseFree(p) {
		noise = Noise
	}
	if w.m == nil {
		w.m = NewMatcher(w.facts)
	}
	if w.hang != nil {
		w.hang.FeedChunk(p) // every line, before any is shed
	}
	shed, _ := w.m.FeedChunk(p, noise, w.write)
	return shed
}

// write writes the diagnoses found on a line; w.mu is held.
func (w *Watch) write(ds []Diagnosis) {
	for _, d := range ds {
		if DefaultCatalog().HeldBack(d.ID) {
			continue // left to the end, and only if nothing specific follows
		}
		if !w.written[d.ID] {
			w.said = append(w.said, d)
		}
		w.written[d.ID] = true
		_, _ = w.w.Write(Message(d))
		if w.found != nil {
			if line := w.found(d); line != "" {
				_, _ = io.WriteString(w.w, line)
			}
		}
	}
}

// Result is what the Watch found so far: the diagnoses (Matcher.Diagnoses),
// the first failure, and the ids of those written while it was fed; the
// others are the caller's to write. A diagnosis written while the command
// ran that the matcher no longer lists (a lost peer folded into a cause
// seen after it) stays in ds, after the others, as it was written: the
// report, the exit summary and the termination message never drop what
// the user was told.
func (w *Watch) Result() (ds []Diagnosis, first *Failure, written map[string]bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m != nil {
		ds, first = w.m.Diagnoses(), w.m.FirstFailure()
	}
	for _, d := range w.said {
		listed := false
		for _, o := range ds {
			listed = listed || o.ID == d.ID
		}
		if !listed {
			ds = append(ds, d)
		}
	}
	written = make(map[string]bool, len(w.written))
	for id := range w.written {
		written[id] = true
	}
	return ds, first, written
}
