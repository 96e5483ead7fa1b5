package diagnosis

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/ncclrun/ncclrun/internal/lazy"
	"github.com/ncclrun/ncclrun/internal/shown"
)

// MaxLine is the longest line the matcher looks at; longer lines are cut
// (shownPart), never an error.
const MaxLine = 64 << 10

// shownPart is what the matcher looks at of a line longer than MaxLine:
// what a terminal shows of it (internal/shown: the text from its last
// '\r' on, where the NCCL line after a progress bar's redraws is), cut to
// its first MaxLine bytes. It returns how many bytes of line it dropped
// in front. A line of at most MaxLine bytes is returned as it is, without
// looking at it.
func shownPart(line []byte) (part []byte, skipped int) {
	if len(line) <= MaxLine {
		return line, 0
	}
	skipped = shown.Start(bytes.TrimSuffix(line, newline))
	line = line[skipped:]
	return line[:min(len(line), MaxLine)], skipped
}

// Matcher watches lines of output and collects diagnoses. Feed and
// FeedAll must be called from one goroutine at a time; Diagnoses may be
// called concurrently with them. The zero value is not usable: use
// NewMatcher or NewMatcherWith.
type Matcher struct {
	cat   *Catalog
	facts Facts

	// Feed's scratch, owned by the feeding goroutine.
	scan automatonScan
	cand []int32
	// filter is the gram filter over the patterns that can still change
	// the result (the catalog's until a marker is seen, then this
	// matcher's own without the seen markers); nofilter turns it off
	// (tests compare both paths).
	filter   *gramFilter
	nofilter bool
	// wide is filter with the windowed markers' literals (Catalog.wide):
	// the scan of a chunk uses it, feedAll then asks filter.
	wide *gramFilter
	// markerFilter is the gram filter of the markers not seen yet, as of
	// filter markerFilterOf (FeedChunk's unseenMarker).
	markerFilter, markerFilterOf *gramFilter
	// lineNo counts the lines fed; sum is the torchrun failure-summary
	// entry being read (torchrun.go); cands is addBare's scratch.
	lineNo int
	sum    summary
	cands  []uint64
	// memo remembers the candidates and matches of the lines seen last
	// (memo.go); sawSummary is candidates' second result.
	memo       *memoTable
	sawSummary bool

	mu      sync.Mutex
	seq     int
	markers []bool // by pattern index: marker seen
	// markerAt is the line number a windowed marker was last seen on.
	markerAt map[int]int
	// commRank is the rank each NCCL process named in its first `comm
	// ... rank N` line (a CommRank marker), at most maxCommRanks.
	commRank map[procID]int
	// addrHost is the host each address of a HostAddr marker belongs to,
	// at most maxCommRanks.
	addrHost map[string]string
	// addrLines are the HostAddr lines read (host and text hashed), so
	// that a line fed again costs no expression.
	addrLines map[uint64]struct{}
	// host and pid are the first NCCL process seen (seeHost); otherHost
	// says a second host was seen, twoProcs a second process of host.
	host                string
	pid                 int
	otherHost, twoProcs bool
	// remoteWarn is the message of the last NCCL WARN another host
	// printed (isLocal): a line without a host that repeats it (NCCL's
	// `Last error:` follow-up, a framework's exception quoting it) is
	// that host's too.
	remoteWarn []byte
	states     map[string]*state
	order      []*state
	// exc is the first exception a program raised that no catalog
	// pattern claimed (exception.go).
	exc  *exception
	room room // what the states may still remember together (count.go)
}

// NewMatcher returns a matcher over the shipped catalog (DefaultCatalog).
func NewMatcher(f Facts) *Matcher { return NewMatcherWith(DefaultCatalog(), f) }

// NewMatcherWith returns a matcher over catalog c (benchmarks and tests
// build their own catalogs with NewCatalog).
func NewMatcherWith(c *Catalog, f Facts) *Matcher {
	return &Matcher{
		cat:     c,
		facts:   f,
		scan:    newAutomatonScan(c),
		room:    newRoom(),
		filter:  c.filter,
		wide:    c.wide,
		markers: make([]bool, len(c.pats)),
		states:  map[string]*state{},
	}
}

// Feed offers one line (a trailing "\n" or "\r\n" is ignored; lines over
// MaxLine are cut). It returns the diagnosis when this line is the first
// sighting of a cause, so that run can print it at once; nil otherwise
// (also for the generic nccl-error once a specific failure is known). When
// one line reveals several causes at once, Feed returns the first and
// FeedAll all of them. Feed never retains line; a line that contains none
// of the catalog's literals costs one pass of the prefilter and no
// allocation.
func (m *Matcher) Feed(line []byte) *Diagnosis {
	ds := m.FeedAll(line)
	if len(ds) == 0 {
		return nil
	}
	return &ds[0]
}

// FeedAll is Feed returning every cause this line made visible (nil for
// most lines).
func (m *Matcher) FeedAll(line []byte) []Diagnosis { return m.feedAll(line) }

// feedAll is FeedAll. A chunk's scan passed the line through the wide
// filter (the windowed markers' literals too), so it meets filter again
// here. Running on without the filter gives FeedAll's result whether the filter
// would pass the line or not: it only decides whether the automaton may
// find a literal that can change the result.
//
// One line goes one way: its view (NCCL's prefix, parsed once), then its
// candidates and their matches (from the memo by its text, or the
// automaton and the expressions over the text), then the markers, the
// host, the sighting recorded, the diagnoses announced.
func (m *Matcher) feedAll(line []byte) []Diagnosis {
	m.lineNo++
	if len(line) > MaxLine {
		line, _ = shownPart(line)
	}
	side := len(m.cat.windowed) > 0 && (m.nofilter || m.wide.mayMatch(line))
	hit := m.nofilter || m.filter.mayMatch(line) // the wide filter passes it too
	if !side && !hit {
		return nil
	}
	v, e, cand, followed := m.look(trimEOL(line))
	if side {
		m.sideLine(&v, e, cand)
	}
	if !hit {
		return nil
	}
	if len(cand) > 0 && ownLine(line) {
		return nil
	}
	if len(cand) == 0 || (!m.nofilter && m.onlySeenMarkers(cand)) {
		if followed {
			m.mu.Lock()
			m.noteException(trimEOL(line))
			m.mu.Unlock()
		}
		return nil
	}
	line = v.line

	// A line whose candidates are only markers seen already is one the
	// gram filter rejects: it does not count as a host either, so that
	// both paths agree.
	countHost := !m.onlySeenMarkers(cand)

	m.mu.Lock()
	defer m.mu.Unlock()
	m.seq++
	markerHit := false
	for k, pi := range cand {
		p := m.cat.pats[pi]
		if p.Marker && !p.windowed && !m.markers[pi] && e.matches(k, p, v.text) {
			m.markers[pi] = true
			markerHit = true
		}
	}
	if countHost && m.seeHost(&v) {
		markerHit = true
	}
	if markerHit && !m.nofilter {
		live := func(i int) bool { return !m.cat.pats[i].Marker || !m.markerDone(i) }
		m.filter = buildGramFilter(m.cat.pats, live)
		m.wide = buildGramFilter(m.cat.pats, func(i int) bool { return live(i) || m.cat.pats[i].windowed })
	}
	var touched *state
	local := m.isLocal(&v)
	// A pattern whose required marker is off for now does not claim the
	// line: it may still be another pattern's (a CUDA failure that no NVLS
	// setup explains is the generic error's). Its sighting is kept beside
	// the claim of another entry, so that should the marker come on later
	// both stand and the ranking decides; beside a claim of its own entry
	// the line counts once, as the claim.
	var pendBuf [4]*cpattern
	pending := pendBuf[:0]
	var claim *cpattern
	for k, pi := range cand {
		p := m.cat.pats[pi]
		if p.Marker || !m.factsAllow(p, local) || !e.matches(k, p, v.text) {
			continue
		}
		if p.requires >= 0 && !m.markerOn(p.requires) {
			pending = append(pending, p)
			continue
		}
		if p.notAfter >= 0 {
			if at, ok := m.markerAt[p.notAfter]; ok && m.lineNo-at <= p.NotAfterLines {
				continue
			}
		}
		claim = p
		break
	}
	for _, p := range pending {
		if claim != nil && p.entry == claim.entry {
			continue
		}
		if st := m.record(p, &v, local); touched == nil || m.isActive(st) {
			touched = st
		}
	}
	if claim != nil {
		if st := m.record(claim, &v, local); touched == nil || m.isActive(st) {
			touched = st
		}
	}
	if followed && touched == nil {
		m.noteException(line)
	}
	var fresh []*state
	if touched != nil && !touched.announced && m.announceable(touched) {
		touched.announced = true
		fresh = append(fresh, touched)
	}
	if markerHit {
		for _, st := range m.order {
			if !st.announced && m.announceable(st) {
				st.announced = true
				fresh = append(fresh, st)
			}
		}
	}
	if len(fresh) == 0 {
		return nil
	}
	out := make([]Diagnosis, 0, len(fresh))
	for _, st := range fresh {
		if st.ce.Generic && m.failureKnown(st.ce.HiddenBy) {
			continue
		}
		out = append(out, m.snapshot(st))
	}
	return out
}

// ownTag starts every line ncclrun writes of its own.
var ownTag = []byte("ncclrun: ")

// ownWindow is how far into a line ownLine looks for ownTag: past a
// launcher's rank tag, a pod prefix or a timestamp.
const ownWindow = 160

// ownLine reports whether line is one of ncclrun's own ("ncclrun: ...",
// perhaps behind a launcher's tag or a timestamp): an inner ncclrun (an
// image whose ENTRYPOINT is ncclrun running `ncclrun demo`, mpirun
// starting ncclrun per rank) writes its preflight and its diagnoses,
// which quote NCCL's messages and name causes. They are no evidence of
// their own: the NCCL lines they speak of are relayed and matched. A
// line whose "ncclrun: " follows an "NCCL " is NCCL's.
func ownLine(line []byte) bool {
	head := line[:min(len(line), ownWindow)]
	if j := nccl(head); j >= 0 {
		head = head[:j] // an NCCL line's prefix is short: the search is too
	}
	i := bytes.Index(head, ownTag)
	if i < 0 {
		return false
	}
	if i > 0 {
		c := head[i-1]
		if c == '_' || c == '-' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' {
			return false // another word ending in "ncclrun"
		}
	}
	return true
}

// announceable reports whether Feed may return st now: active, not seen
// only through harmless lines, and not a folded knock-on of a cause seen
// before it (Entry.FoldKnockOn: the survivors' lost peer after the
// failure that took that rank down).
func (m *Matcher) announceable(st *state) bool {
	if !m.isActive(st) || m.benignOnly(st) {
		return false
	}
	if m.unsureHost(st) {
		return false
	}
	return !st.ce.FoldKnockOn || !m.specificBefore(m.firstSeq(st))
}

// unsureHost reports whether st is a cause that run's facts chose (a
// registration failure rerouted by this host's memlock) seen only on lines
// that show no host: such a line may repeat another host's WARN still to
// come on another pipe (noteRemoteWarn), so st is not announced while CMD
// runs; it stays in Diagnoses, which run prints at exit.
func (m *Matcher) unsureHost(st *state) bool {
	if m.facts.Host == "" {
		return false
	}
	for _, s := range st.sights {
		if m.sightActive(s) && (s.p.entry == st.ce || !s.hostless) {
			return false
		}
	}
	return true
}

// look reads line: its view, its memo slot (nil: none), its candidates
// and whether a torchrun summary is followed through it. A line whose
// text the memo holds costs a hash and a compare of it, and the part of
// NCCL's prefix that says who printed it: the rest of the prefix, the
// candidates and their matches are the text's.
func (m *Matcher) look(line []byte) (v lineView, e *memo, cand []int32, followed bool) {
	f, who := scanWho(line)
	key := line
	if who {
		key = line[f.tidEnd:]
	}
	if !m.nofilter && len(key) <= memoMaxLine {
		if m.memo == nil {
			m.memo = new(memoTable)
		}
		var hit bool
		if e, hit = m.memo.lookup(key); hit && e.isWhat == who {
			v = viewWith(line, f, e.what, who)
			if e.sum {
				m.sum.see(line, m.lineNo)
			}
			return v, e, e.cand, e.sum
		}
	}
	if v = viewAfterWho(line, f, who); who && !v.prefix {
		e = nil // host:pid:tid, but no NCCL prefix: the text is the whole line, not this key
	}
	cand = m.candidates(v.text, v.line)
	if e != nil {
		e.store(&v, cand, m.sawSummary)
	}
	return v, e, cand, m.sawSummary
}

// candidates runs the automaton over text (line's, lineView.text) and
// returns its candidate patterns in priority order (m.cand's storage); a
// torchrun summary literal among them is followed in line (torchrun.go),
// and m.sawSummary says whether there was one.
func (m *Matcher) candidates(text, line []byte) []int32 {
	cand := m.scan.run(text, m.cand[:0])
	m.sawSummary = false
	if n := int32(len(m.cat.pats)); len(cand) > 0 {
		// A torchrun summary line (torchrun.go) is followed, not matched.
		k := 0
		for _, pi := range cand {
			if pi < n {
				cand[k] = pi
				k++
			}
		}
		if k < len(cand) {
			m.sum.see(line, m.lineNo)
			m.sawSummary = true
			cand = cand[:k]
		}
	}
	// Insertion sort: candidates are few; pattern index order is priority order.
	for i := 1; i < len(cand); i++ {
		for j := i; j > 0 && cand[j] < cand[j-1]; j-- {
			cand[j], cand[j-1] = cand[j-1], cand[j]
		}
	}
	m.cand = cand
	return cand
}

// seeHost notes the host and pid of a candidate line: the MultiHost
// markers go on at the second distinct host, the SingleHost markers at a
// second process of the first host while no other host was seen; it
// reports whether it turned markers on.
func (m *Matcher) seeHost(v *lineView) bool {
	mh := m.cat.multiHost
	if m.otherHost || len(mh) > 0 && m.markers[mh[0]] || len(mh) == 0 && len(m.cat.singleHost) == 0 {
		return false // a multi-node job: a SingleHost marker no longer matters
	}
	var h string
	var pid int
	if v.prefix {
		// A raw NCCL line, read without allocating while its host is known.
		if m.host != "" && string(v.host()) == m.host && (v.f.pid == m.pid || m.twoProcs) {
			return false
		}
		h, pid = string(v.host()), v.f.pid
	} else {
		pl := v.parse()
		if pl.Start < 0 && pl.PID == 0 {
			return false
		}
		h, pid = pl.Host, pl.PID
	}
	switch {
	case h == "":
		return false
	case m.host == "":
		m.host, m.pid = h, pid
		return false
	case h == m.host:
		if pid == 0 || pid == m.pid || m.twoProcs {
			return false
		}
		m.twoProcs = true
		for _, i := range m.cat.singleHost {
			m.markers[i] = true
		}
		return len(m.cat.singleHost) > 0
	}
	m.otherHost = true
	for _, i := range m.cat.multiHost {
		m.markers[i] = true
	}
	return len(m.cat.multiHost) > 0
}

// onlySeenMarkers reports whether every candidate is a marker already
// seen: such a line changes nothing (FeedAll would find no new marker and
// no sighting). Only the feeding goroutine writes markers, so it may read
// them without the lock.
func (m *Matcher) onlySeenMarkers(cand []int32) bool {
	for _, pi := range cand {
		if !m.cat.pats[pi].Marker || !m.markerDone(int(pi)) {
			return false
		}
	}
	return true
}

// matches reports whether text (a line's, lineView.text) matches p's
// expression and none of its or its entry's negative patterns. The negative patterns that are plain
// literals are searched first: they are cheap, and a healthy line that
// carries one (NCCL's "No plugin found" INFO for the dlopen pattern)
// is then rejected without running the expression.
func (p *cpattern) matches(line []byte) bool {
	p.mustReady()
	p.entry.mustReady()
	for _, n := range p.notLit {
		if bytes.Contains(line, n) {
			return false
		}
	}
	for _, n := range p.entry.notLit {
		if bytes.Contains(line, n) {
			return false
		}
	}
	if !p.reMatch(line) {
		return false
	}
	for _, n := range p.not {
		if n.match(line) {
			return false
		}
	}
	for _, n := range p.entry.not {
		if n.match(line) {
			return false
		}
	}
	return true
}

// Explain reads a saved log (any bytes, any length) and returns its
// diagnoses, ranked as Diagnoses does. Lines longer than MaxLine are cut
// as Feed cuts them (shownPart). The only error is one from r (wrapped).
func Explain(r io.Reader, f Facts) ([]Diagnosis, error) {
	m := NewMatcher(f)
	if err := FeedReader(m, r); err != nil {
		return m.Diagnoses(), err
	}
	return m.Diagnoses(), nil
}

// feedLineByLine is FeedReader as every line's FeedAll: the reference.
func feedLineByLine(m *Matcher, r io.Reader) error {
	// One byte more than MaxLine: a full buffer is a line FeedAll cuts.
	br := bufio.NewReaderSize(r, MaxLine+1)
	long := shown.Line{Max: MaxLine}
	skipping := false // in a line longer than MaxLine: long keeps its shown part
	for {
		b, err := br.ReadSlice('\n')
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			if !skipping {
				long.Reset(long.Buf)
			}
			long.Add(b)
			skipping = true
			continue
		case skipping:
			long.Add(bytes.TrimSuffix(b, newline))
			m.Feed(long.Buf)
			skipping = false
		case len(b) > 0:
			m.Feed(b)
		}
		switch {
		case err == nil:
			continue
		case errors.Is(err, io.EOF):
			return nil
		default:
			return fmt.Errorf("read log: %w", err)
		}
	}
}

// markerDone reports whether marker i need not be looked for among a
// line's candidates: it was seen, or it is windowed (Pattern.NotAfter's,
// CommRank, HostAddr), which sideLine reads on every line the wide
// filter passes, so a line that holds only such literals is one the
// filter rejects.
func (m *Matcher) markerDone(i int) bool {
	return m.markers[i] || m.cat.pats[i].windowed
}

// maxCommRanks bounds Matcher.commRank: every rank of a 64k-GPU job.
const maxCommRanks = 1 << 16

// noteCommRank keeps the rank an NCCL process names in line (p's "rank"
// group), the first it names: its first communicator is the job's own,
// a later one (a sub-group) numbers its ranks anew.
func (m *Matcher) noteCommRank(p *cpattern, v *lineView, e *memo, k int) {
	id := v.lineProc()
	if id.pid == 0 {
		return
	}
	if _, ok := m.commRank[id]; ok || len(m.commRank) >= maxCommRanks {
		return
	}
	if !e.matches(k, p, v.text) {
		return
	}
	r, _, ok := p.waitedFor(string(v.text))
	if !ok {
		return
	}
	if m.commRank == nil {
		m.commRank = map[procID]int{}
	}
	m.commRank[id] = r
}

// noteHostAddr keeps the host whose NCCL line shows an address of its own
// (p's "addr" group).
func (m *Matcher) noteHostAddr(p *cpattern, v *lineView) {
	if len(m.addrHost) >= maxCommRanks {
		return
	}
	var host string
	if v.raw {
		id := v.proc()
		k := id.host ^ v.textHash()*0x9E3779B97F4A7C15
		if _, ok := m.addrLines[k]; ok {
			return // this process's line, read before
		}
		if m.addrLines == nil {
			m.addrLines = map[uint64]struct{}{}
		}
		m.addrLines[k] = struct{}{}
		host = string(v.host())
	} else {
		host = v.parse().Host
	}
	if host == "" {
		return
	}
	re := p.regexp()
	sm := re.FindSubmatch(v.text)
	i := re.SubexpIndex("addr")
	if sm == nil || i < 0 || i >= len(sm) || len(sm[i]) == 0 {
		return
	}
	if m.addrHost == nil {
		m.addrHost = map[string]string{}
	}
	if _, ok := m.addrHost[string(sm[i])]; !ok {
		m.addrHost[string(sm[i])] = host
	}
}

// peerAddrRe is NCCL's way of naming the remote end of a connection in an
// error: "from peer 10.1.0.6<56243>", "peer 172.17.0.1<48211>".
var peerAddrRe = &lazy.Regexp{Expr: `\bpeer ([0-9A-Fa-f.:]+)<\d+>`}

// peerHostOf is the host whose own NCCL line showed the address line's
// error names as its peer ("" when none did).
func (m *Matcher) peerHostOf(line string) string {
	if len(m.addrHost) == 0 || !strings.Contains(line, "peer ") {
		return ""
	}
	sm := peerAddrRe.Get().FindStringSubmatch(line)
	if sm == nil {
		return ""
	}
	return m.addrHost[sm[1]]
}

// sideLine reads the windowed markers (Pattern.NotAfter's, CommRank,
// HostAddr) among a line's candidates (e: its memo slot, may be nil):
// their literals are not in filter, so that the lines that carry them (a
// process's comm and Bootstrap lines) cost their own expressions only.
func (m *Matcher) sideLine(v *lineView, e *memo, cand []int32) {
	for k, pi := range cand {
		p := m.cat.pats[pi]
		if !p.windowed {
			continue
		}
		m.mu.Lock()
		switch {
		case p.CommRank:
			m.noteCommRank(p, v, e, k) // a process already read costs no expression
		case p.HostAddr:
			m.noteHostAddr(p, v)
		case e.matches(k, p, v.text):
			if m.markerAt == nil {
				m.markerAt = map[int]int{}
			}
			m.markerAt[int(pi)] = m.lineNo
			m.markers[pi] = true
		}
		m.mu.Unlock()
	}
}

// lineProc is the NCCL process (host:pid prefix) that printed the line,
// the zero procID for another line; without allocating for a line that
// starts with NCCL's prefix.
func (v *lineView) lineProc() procID {
	if v.raw {
		return v.proc()
	}
	if pl := v.parse(); pl.Start >= 0 && pl.Host != "" && pl.PID != 0 {
		return procID{hashString(pl.Host), int64(pl.PID)}
	}
	return procID{}
}
