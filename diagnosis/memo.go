package diagnosis

import "bytes"

// A job that fails prints the same lines many times: every rank's
// "NET/IB : Got completion from peer ... with status=12", each under its
// own "host:pid:tid" prefix, and the proxy's "Connection closed by remote
// peer" at every retry. For each such line the matcher would run the
// automaton and then the regular expressions of its candidates (about 1
// to 10 us a line), while counting the sighting costs a tenth of that.
//
// The catalog reads a line from its text on (lineView.text: past NCCL's
// host:pid:tid, which say who printed the line, not what happened), so
// the candidates and each candidate's match are functions of the text
// alone. A matcher remembers them for the texts it saw last: a line whose
// text equals a remembered one byte for byte reuses them, whichever rank
// printed it, and only the counting (which depends on the matcher's state
// and on the line's process) runs again. TestMemoSameResults and
// FuzzFastPath compare a matcher with and without the memo line by line.
//
// The memory is a two-way table of memoSlots texts of at most
// memoMaxLine bytes (a new text replaces the older of its two slots),
// allocated on the first line that passes the gram filter: about 200 KiB
// of slots, half a MiB at most with their texts.
const (
	memoSlots   = 1024
	memoMaxLine = 256
)

// memo is one remembered text: its candidates after the automaton (in
// priority order, torchrun's summary literals removed, sum telling
// whether there were any), and for each of the first 64 candidates
// whether its match is known and what it is.
type memo struct {
	hash, used  uint64
	text        []byte
	cand        []int32
	sum         bool
	known, hits uint64
	// what is scanWhat of a raw NCCL line's text (what says true), the
	// zero value for another line's.
	what   prefixAt0
	isWhat bool
}

type memoTable struct {
	slot [memoSlots]memo
	tick uint64
}

// lookup returns text's slot and whether it holds text. A text may live
// in two slots (two-way: texts that collide in one do not evict each
// other at every turn, as a handful of a job's repeated lines would in a
// direct-mapped table); a new text takes the one used less recently.
func (t *memoTable) lookup(text []byte) (*memo, bool) {
	h := hashBytes(text)
	t.tick++
	a, b := &t.slot[h&(memoSlots-1)], &t.slot[(h>>32)&(memoSlots-1)]
	for _, e := range [2]*memo{a, b} {
		if e.text != nil && e.hash == h && bytes.Equal(e.text, text) {
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

// store fills e with v's text and its candidates; what it knows of their
// matches starts empty.
func (e *memo) store(v *lineView, cand []int32, sum bool) {
	e.text = append(e.text[:0], v.text...)
	e.cand = append(e.cand[:0], cand...)
	e.sum = sum
	e.known, e.hits = 0, 0
	e.what, e.isWhat = v.what, v.prefix
}

// matches is p.matches(text) for the k-th candidate of e's text,
// remembered (e may be nil: not).
func (e *memo) matches(k int, p *cpattern, text []byte) bool {
	if e == nil || k >= 64 {
		return p.matches(text)
	}
	bit := uint64(1) << k
	if e.known&bit != 0 {
		return e.hits&bit != 0
	}
	ok := p.matches(text)
	e.known |= bit
	if ok {
		e.hits |= bit
	}
	return ok
}

// lineView is one line as the matcher reads it, parsed once: NCCL's
// prefix when the line starts with one (the common case: a raw NCCL line,
// "host:pid:tid [dev] ..."), and the text the catalog reads.
type lineView struct {
	line []byte
	// text is what the automaton and the expressions read: for a raw NCCL
	// line, the line from the end of host:pid:tid on (" [dev] ..."); for
	// any other line, the whole line.
	text []byte
	// prefix says that the line starts with NCCL's prefix (f), pid 0
	// included; raw, that it has a pid too: a process record counts.
	prefix, raw bool
	f           prefixAt0
	what        prefixAt0 // scanWhat of text, when prefix
	// pl is ParseLine of the line once parse has run (parsed): the
	// fields as strings, which only a line that is counted, placed or
	// not NCCL's needs.
	pl     Line
	parsed bool
}

// parse is ParseLine of the line, read once whoever asks.
func (v *lineView) parse() Line {
	if !v.parsed {
		v.pl, v.parsed = ParseLine(v.line), true
	}
	return v.pl
}

// viewAfterWho parses line (trimmed of its end of line) given scanWho's
// f and who of it.
func viewAfterWho(line []byte, f prefixAt0, who bool) lineView {
	if !who {
		return lineView{line: line, text: line}
	}
	what, ok := scanWhat(line[f.tidEnd:])
	return viewWith(line, f, what, ok)
}

// viewWith is the view of line given scanWho's f and scanWhat's what of
// the text after it (ok: it read NCCL's prefix).
func viewWith(line []byte, f prefixAt0, what prefixAt0, ok bool) lineView {
	if !ok {
		return lineView{line: line, text: line}
	}
	f = f.with(what)
	return lineView{line: line, text: line[f.tidEnd:], prefix: true, raw: f.pid != 0, f: f, what: what}
}

// host is the host of a line with NCCL's prefix.
func (v *lineView) host() []byte { return v.line[v.f.hostStart:v.f.hostEnd] }

// proc is the process of a raw NCCL line.
func (v *lineView) proc() procID { return procID{hashBytes(v.host()), int64(v.f.pid)} }

// textHash is the hash of a raw NCCL line's message, as record counts it.
func (v *lineView) textHash() uint64 { return hashBytes(bytes.TrimSpace(v.line[v.f.msgStart:])) }
