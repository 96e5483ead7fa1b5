package diagnosis

import "bytes"

// A job that fails prints the same lines many times: every rank's
// "NET/IB : Got completion from peer ... with status=12" once a queue pair,
// the proxy's "Connection closed by remote peer" at every retry. For each
// such line FeedAll runs the automaton and then the regular expressions of
// its candidates (and their negative patterns), about 1 to 10 us a line,
// while counting the sighting costs a tenth of that. Both the candidates
// and each candidate's match are functions of the line's bytes alone, so a
// matcher remembers them for the lines it saw last: a line equal byte for
// byte to a remembered one reuses them, and only the counting (which
// depends on the matcher's state) runs again, from the line's NCCL prefix
// and hashes remembered too. The results are the same by
// construction; TestMemoSameResults and FuzzFastPath compare a matcher
// with and without it line by line.
//
// The memory is a two-way table of memoSlots lines of at most
// memoMaxLine bytes (a new line replaces the older of its two slots), allocated
// on the first line that reaches the automaton: about 300 KiB at most.
const (
	memoSlots   = 1024
	memoMaxLine = 256
)

// memo is one remembered line: its candidates after the automaton (in
// priority order, torchrun's summary literals removed, sum telling
// whether there were any), and for each of the first 64 candidates
// whether its match is known and what it is.
type memo struct {
	hash, used  uint64
	line        []byte
	cand        []int32
	sum         bool
	known, hits uint64
	// rawKnown says that rawLine holds line's NCCL prefix as record
	// counts it.
	rawKnown bool
	rawLine  rawNCCL
	// recIn and recBy: record counted the line into this state for this
	// pattern (count.go): a repeat only adds a line.
	recIn *state
	recBy *cpattern
}

// rawNCCL is what record counts of a raw NCCL line ("host:pid:tid [dev]
// ..."): the host's bytes in the line, its hash, the pid and the hash of
// the message; ok is false for any other line.
type rawNCCL struct {
	ok                 bool
	hostStart, hostEnd int
	pid                int64
	hostHash, textHash uint64
}

// raw is rawNCCL of line (trimmed), remembered in e when e is not nil.
func (e *memo) raw(line []byte) rawNCCL {
	if e != nil && e.rawKnown {
		return e.rawLine
	}
	var r rawNCCL
	if f, ok := scanPrefixAt0(line); ok && f.pid != 0 {
		r = rawNCCL{ok: true, hostStart: f.hostStart, hostEnd: f.hostEnd, pid: int64(f.pid),
			hostHash: hashBytes(line[f.hostStart:f.hostEnd]), textHash: hashBytes(bytes.TrimSpace(line[f.msgStart:]))}
	}
	if e != nil {
		e.rawKnown, e.rawLine = true, r
	}
	return r
}

type memoTable struct {
	slot [memoSlots]memo
	tick uint64
}

// lookup returns line's slot and whether it holds line. A line may live
// in two slots (two-way: lines that collide in one do not evict each
// other at every turn, as a handful of a job's repeated lines would in a
// direct-mapped table); a new line takes the one used less recently.
func (t *memoTable) lookup(line []byte) (*memo, bool) {
	h := hashBytes(line)
	t.tick++
	a, b := &t.slot[h&(memoSlots-1)], &t.slot[(h>>32)&(memoSlots-1)]
	for _, e := range [2]*memo{a, b} {
		if e.line != nil && e.hash == h && bytes.Equal(e.line, line) {
			e.used = t.tick
			return e, true
		}
	}
	e := a
	if b.used < a.used {
		e = b
	}
	e.hash, e.used = h, t.tick
	return e, false
}

// store fills e with line's candidates; what it knows of their matches
// starts empty.
func (e *memo) store(line []byte, cand []int32, sum bool) {
	e.line = append(e.line[:0], line...)
	e.cand = append(e.cand[:0], cand...)
	e.sum = sum
	e.known, e.hits = 0, 0
	e.rawKnown = false
	e.recIn, e.recBy = nil, nil
}

// matches is p.matches(line, t) for the k-th candidate of e's line,
// remembered.
func (e *memo) matches(k int, p *cpattern, line []byte, t *tailMemo) bool {
	if e == nil || k >= 64 {
		return p.matches(line, t)
	}
	bit := uint64(1) << k
	if e.known&bit != 0 {
		return e.hits&bit != 0
	}
	ok := p.matches(line, t)
	e.known |= bit
	if ok {
		e.hits |= bit
	}
	return ok
}
