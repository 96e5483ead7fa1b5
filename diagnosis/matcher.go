package diagnosis

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// MaxLine is the longest line the matcher looks at; longer lines are cut
// (Feed) or cut and their rest skipped (Explain), never an error.
const MaxLine = 64 << 10

// maxFirstLine bounds Diagnosis.FirstLine.
const maxFirstLine = 2048

// failurePriority is the priority from which a cause is a failure (it
// hides the generic nccl-error) rather than an observation.
const failurePriority = 50

const memlockHow = "run it under ncclrun run, or check `ulimit -l` and CapEff in the failing container: " +
	"unlimited or CAP_IPC_LOCK means memory-registration (driver/kernel)"

// Matcher watches lines of output and collects diagnoses. Feed and
// FeedAll must be called from one goroutine at a time; Diagnoses may be
// called concurrently with them. The zero value is not usable: use
// NewMatcher or NewMatcherWith.
type Matcher struct {
	cat   *Catalog
	facts Facts

	// Feed's scratch, owned by the feeding goroutine.
	stamp []uint32
	gen   uint32
	cand  []int32
	// filter is the gram filter over the patterns that can still change
	// the result (the catalog's until a marker is seen, then this
	// matcher's own without the seen markers); nofilter turns it off
	// (tests compare both paths).
	filter   *gramFilter
	nofilter bool

	mu      sync.Mutex
	seq     int
	markers []bool // by pattern index: marker seen
	states  map[string]*state
	order   []*state
}

// state is one cause being collected.
type state struct {
	ce     *centry
	sights []sight // one per pattern, in order of first sighting
	lines  int
	// procs are the processes that printed a matching line with NCCL's
	// host:pid prefix; wtext maps each such line's message text to the
	// processes that printed it (for recognising PyTorch's echoes).
	procs map[string]struct{}
	wtext map[string]map[string]struct{}
	npair int // entries in wtext's sets, bounded by maxTextPairs
	// utext counts the matching lines without NCCL's prefix by message
	// text (and Ray/vLLM process, when its prefix names one); overflow
	// counts those past maxTexts, each alone.
	utext    map[utextKey]int
	overflow int
	hosts    map[string]struct{}
	// announced: returned by Feed/FeedAll once (or skipped there as a
	// generic cause hidden by a failure).
	announced bool
}

type sight struct {
	p         *cpattern
	seq       int
	firstLine string
}

// utextKey is an unprefixed matching line's message text and the Ray/vLLM
// process named by its prefix ("" when none).
type utextKey struct{ text, proc string }

// Bounds on what a state remembers for counting echoes: a log with more
// distinct texts still counts, only less exactly (extra lines count alone).
const (
	maxTexts     = 4096
	maxTextPairs = 1 << 16
	// maxEchoPrefix is how far into an unprefixed line the echoed WARN
	// text may start (after a collector's own words, e.g. pdsh's "host: ").
	maxEchoPrefix = 96
)

// NewMatcher returns a matcher over the shipped catalog (DefaultCatalog).
func NewMatcher(f Facts) *Matcher { return NewMatcherWith(DefaultCatalog(), f) }

// NewMatcherWith returns a matcher over catalog c (benchmarks and tests
// build their own catalogs with NewCatalog).
func NewMatcherWith(c *Catalog, f Facts) *Matcher {
	return &Matcher{
		cat:     c,
		facts:   f,
		stamp:   make([]uint32, len(c.pats)),
		filter:  c.filter,
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
func (m *Matcher) FeedAll(line []byte) []Diagnosis {
	if len(line) > MaxLine {
		line = line[:MaxLine]
	}
	if !m.nofilter && !m.filter.mayMatch(line) {
		return nil
	}
	m.gen++
	if m.gen == 0 {
		clear(m.stamp)
		m.gen = 1
	}
	m.cand = m.cat.ac.scan(line, m.stamp, m.gen, m.cand[:0])
	if len(m.cand) == 0 || (!m.nofilter && m.onlySeenMarkers(m.cand)) {
		return nil
	}
	cand := m.cand
	// Insertion sort: candidates are few; pattern index order is priority order.
	for i := 1; i < len(cand); i++ {
		for j := i; j > 0 && cand[j] < cand[j-1]; j-- {
			cand[j], cand[j-1] = cand[j-1], cand[j]
		}
	}
	line = trimEOL(line)

	m.mu.Lock()
	defer m.mu.Unlock()
	m.seq++
	markerHit := false
	for _, pi := range cand {
		p := m.cat.pats[pi]
		if p.Marker && !m.markers[pi] && p.matches(line) {
			m.markers[pi] = true
			markerHit = true
		}
	}
	if markerHit && !m.nofilter {
		m.filter = buildGramFilter(m.cat.pats, func(i int) bool { return !m.cat.pats[i].Marker || !m.markers[i] })
	}
	var touched *state
	for _, pi := range cand {
		p := m.cat.pats[pi]
		if p.Marker || (p.Unless == UnlessNoRDMA && m.facts.Known && m.facts.NoRDMA) || !p.matches(line) {
			continue
		}
		touched = m.record(p, line)
		break
	}
	var fresh []*state
	if touched != nil && !touched.announced && m.isActive(touched) {
		touched.announced = true
		fresh = append(fresh, touched)
	}
	if markerHit {
		for _, st := range m.order {
			if !st.announced && m.isActive(st) {
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
		if st.ce.Generic && m.failureKnown() {
			continue
		}
		out = append(out, m.snapshot(st))
	}
	return out
}

// onlySeenMarkers reports whether every candidate is a marker already
// seen: such a line changes nothing (FeedAll would find no new marker and
// no sighting). Only the feeding goroutine writes markers, so it may read
// them without the lock.
func (m *Matcher) onlySeenMarkers(cand []int32) bool {
	for _, pi := range cand {
		if !m.cat.pats[pi].Marker || !m.markers[pi] {
			return false
		}
	}
	return true
}

// matches reports whether line matches p's expression and none of its or
// its entry's negative patterns. The negative patterns that are plain
// literals are searched first: they are cheap, and a healthy line that
// carries one (NCCL's "No plugin found" INFO for the dlopen pattern)
// is then rejected without running the expression.
func (p *cpattern) matches(line []byte) bool {
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
	if !p.re.Match(line) {
		return false
	}
	for _, n := range p.not {
		if n.Match(line) {
			return false
		}
	}
	for _, n := range p.entry.not {
		if n.Match(line) {
			return false
		}
	}
	return true
}

// record counts a sighting of p on line; it returns the cause's state.
func (m *Matcher) record(p *cpattern, line []byte) *state {
	ce := p.entry
	if ce.Facts == FactsMemlock && ce.AdequateID != "" && m.facts.Known && m.facts.MemlockAdequate {
		ce = m.cat.byID[ce.AdequateID]
	}
	st := m.states[ce.ID]
	if st == nil {
		st = &state{ce: ce, procs: map[string]struct{}{}, wtext: map[string]map[string]struct{}{},
			utext: map[utextKey]int{}, hosts: map[string]struct{}{}}
		m.states[ce.ID] = st
		m.order = append(m.order, st)
	}
	pl := ParseLine(line)
	st.lines++
	if pl.Start >= 0 && pl.Host != "" && pl.PID != 0 {
		key := pl.Host + ":" + strconv.Itoa(pl.PID)
		st.procs[key] = struct{}{}
		st.addWarnText(strings.TrimSpace(pl.Msg), key)
	} else {
		proc := ""
		switch {
		case pl.Host != "" && pl.PID != 0:
			proc = pl.Host + ":" + strconv.Itoa(pl.PID)
		case pl.PID != 0:
			proc = "pid:" + strconv.Itoa(pl.PID)
		}
		st.addBareText(bareText(line), proc)
	}
	if pl.Host != "" {
		st.hosts[pl.Host] = struct{}{}
	}
	for _, s := range st.sights {
		if s.p == p {
			return st
		}
	}
	st.sights = append(st.sights, sight{p: p, seq: m.seq, firstLine: firstLine(p, line, pl)})
	return st
}

func (st *state) addWarnText(text, proc string) {
	set := st.wtext[text]
	if set == nil {
		if len(st.wtext) >= maxTexts {
			return
		}
		set = map[string]struct{}{}
		st.wtext[text] = set
	}
	if _, ok := set[proc]; !ok && st.npair < maxTextPairs {
		set[proc] = struct{}{}
		st.npair++
	}
}

func (st *state) addBareText(text, proc string) {
	k := utextKey{text, proc}
	if _, ok := st.utext[k]; !ok && len(st.utext) >= maxTexts {
		if proc != "" {
			st.procs[proc] = struct{}{}
		} else {
			st.overflow++
		}
		return
	}
	st.utext[k]++
}

// bareText is the message of a line without NCCL's prefix: collector
// prefixes removed, and what follows PyTorch's "Last error:" when the
// echo shares its line.
func bareText(line []byte) string {
	b := stripCollector(line)
	if i := bytes.Index(b, []byte("Last error:")); i >= 0 {
		b = b[i+len("Last error:"):]
	}
	return string(bytes.TrimSpace(b))
}

// echoOf returns the WARN text (printed with NCCL's prefix by some
// process) that the unprefixed text repeats: the whole text, or its end
// from a word boundary in the first maxEchoPrefix bytes.
func (st *state) echoOf(text string) (string, bool) {
	if _, ok := st.wtext[text]; ok {
		return text, true
	}
	for i := 1; i < len(text) && i <= maxEchoPrefix; i++ {
		if text[i-1] == ' ' && text[i] != ' ' {
			if _, ok := st.wtext[text[i:]]; ok {
				return text[i:], true
			}
		}
	}
	return "", false
}

// count is the number of processes that reported the cause. A line with
// NCCL's host:pid prefix counts its process once. A line without it whose
// text repeats a WARN text some prefixed process printed is PyTorch's
// echo of that WARN (after "Last error:"): per text, echoes count only
// beyond the processes that printed it with a prefix. Other unprefixed
// lines count alone (or as their Ray/vLLM process).
func (st *state) count() int {
	n := len(st.procs) + st.overflow
	var echoes map[string]int
	var others map[string]struct{}
	for k, lines := range st.utext {
		if t, ok := st.echoOf(k.text); ok {
			if echoes == nil {
				echoes = map[string]int{}
			}
			echoes[t] += lines
			continue
		}
		if k.proc != "" {
			if _, known := st.procs[k.proc]; !known {
				if others == nil {
					others = map[string]struct{}{}
				}
				others[k.proc] = struct{}{}
			}
			continue
		}
		n += lines
	}
	n += len(others)
	for t, e := range echoes {
		if extra := e - len(st.wtext[t]); extra > 0 {
			n += extra
		}
	}
	return n
}

// markerOn reports whether marker pattern i was seen and is not
// suppressed (the catalog has no suppression cycles).
func (m *Matcher) markerOn(i int) bool {
	if !m.markers[i] {
		return false
	}
	for _, j := range m.cat.pats[i].suppressedBy {
		if m.markerOn(j) {
			return false
		}
	}
	return true
}

func (m *Matcher) sightActive(s sight) bool {
	if s.p.requires >= 0 && !m.markerOn(s.p.requires) {
		return false
	}
	for _, j := range s.p.suppressedBy {
		if m.markerOn(j) {
			return false
		}
	}
	return true
}

func (m *Matcher) isActive(st *state) bool {
	for _, s := range st.sights {
		if m.sightActive(s) {
			return true
		}
	}
	return false
}

// failureKnown reports whether an active non-generic cause of failure
// priority exists (it hides nccl-error).
func (m *Matcher) failureKnown() bool {
	for _, st := range m.order {
		if !st.ce.Generic && m.isActive(st) && m.priority(st) >= failurePriority {
			return true
		}
	}
	return false
}

// ranksAfter reports whether st ranks after cause id: every active
// sighting's pattern lists id (entry or pattern After).
func (m *Matcher) ranksAfter(st *state, id string) bool {
	any := false
	for _, s := range st.sights {
		if !m.sightActive(s) {
			continue
		}
		if !s.p.after[id] {
			return false
		}
		any = true
	}
	return any
}

func (m *Matcher) priority(st *state) int {
	best := -1 << 31
	for _, s := range st.sights {
		if m.sightActive(s) && s.p.prio > best {
			best = s.p.prio
		}
	}
	return best
}

func (m *Matcher) firstSeq(st *state) int {
	for _, s := range st.sights { // sights are in seq order
		if m.sightActive(s) {
			return s.seq
		}
	}
	return 1<<31 - 1
}

// snapshot renders a state as a Diagnosis, applying the facts.
func (m *Matcher) snapshot(st *state) Diagnosis {
	ce := st.ce
	var src *sight
	certain := false
	var likelyHow string
	for i := range st.sights {
		s := &st.sights[i]
		if !m.sightActive(*s) {
			continue
		}
		if src == nil {
			src = s
		}
		if s.p.certainty == Certain || (s.p.certainWith >= 0 && m.markerOn(s.p.certainWith)) {
			certain = true
		} else if likelyHow == "" {
			likelyHow = s.p.How
		}
	}
	d := Diagnosis{ID: ce.ID, Title: ce.Title, Cause: ce.Cause, Fix: ce.Fix, Lines: st.lines, Count: st.count()}
	if src != nil {
		d.FirstLine = src.firstLine
		// A pattern's own cause/fix apply only to its own entry (not
		// after a reroute to another entry).
		if src.p.entry == ce {
			if src.p.Cause != "" {
				d.Cause = src.p.Cause
			}
			if src.p.Fix != "" {
				d.Fix = src.p.Fix
			}
			if src.p.Note != "" {
				d.Cause += " " + src.p.Note
			}
		}
	}
	if likelyHow == "" {
		likelyHow = ce.How
	}
	switch ce.Facts {
	case FactsMemlock:
		if m.facts.Known {
			certain = true
			if m.facts.Seen != "" {
				// What run saw says it in one sentence; the catalog's
				// general explanation is for a log read without it.
				d.Cause = "NCCL could not pin memory for the network card: the command ran with " + m.facts.Seen + ", so the kernel refused to lock more."
			}
			if m.facts.MemlockFix != "" {
				d.Fix = m.facts.MemlockFix
			}
		} else {
			certain = false
			if likelyHow == "" || likelyHow == ce.How {
				likelyHow = memlockHow
			}
		}
	case FactsMemoryRegistration:
		if m.facts.Known && m.facts.Seen != "" {
			d.Cause += " Preflight saw: " + m.facts.Seen + "."
		}
	case FactsShm:
		if m.facts.ShmBytes > 0 {
			d.Cause += " /dev/shm here is " + formatSize(m.facts.ShmBytes) + "."
		}
	}
	if certain {
		d.Certainty = Certain
	} else {
		d.Certainty = Likely
		d.How = likelyHow
	}
	d.Hosts = make([]string, 0, len(st.hosts))
	for h := range st.hosts {
		d.Hosts = append(d.Hosts, h)
	}
	sort.Strings(d.Hosts)
	return d
}

// Diagnoses returns every cause seen so far, root cause first: specific
// causes by priority then first sighting; knock-on causes (watchdog
// timeout, CUDA OOM) after any specific cause seen before them; an entry
// after the ids in its After list; the generic nccl-error last, and only
// when no failure-level cause was found. Safe to call concurrently with
// Feed.
func (m *Matcher) Diagnoses() []Diagnosis {
	m.mu.Lock()
	defer m.mu.Unlock()
	type ranked struct {
		st        *state
		tier, pri int
		seq       int
	}
	var rs []ranked
	hide := m.failureKnown()
	for _, st := range m.order {
		if !m.isActive(st) || (st.ce.Generic && hide) {
			continue
		}
		r := ranked{st: st, pri: m.priority(st), seq: m.firstSeq(st)}
		switch {
		case st.ce.Generic:
			r.tier = 2
		case st.ce.KnockOn && m.specificBefore(r.seq):
			r.tier = 1
		}
		rs = append(rs, r)
	}
	sort.SliceStable(rs, func(i, j int) bool {
		a, b := rs[i], rs[j]
		if a.tier != b.tier {
			return a.tier < b.tier
		}
		if a.pri != b.pri {
			return a.pri > b.pri
		}
		return a.seq < b.seq
	})
	// Entries that rank after others: move each behind the last of them.
	for pass := 0; pass < len(rs); pass++ {
		moved := false
		for i := 0; i < len(rs); i++ {
			last := -1
			for j := i + 1; j < len(rs); j++ {
				if m.ranksAfter(rs[i].st, rs[j].st.ce.ID) {
					last = j
				}
			}
			if last > i {
				r := rs[i]
				copy(rs[i:last], rs[i+1:last+1])
				rs[last] = r
				moved = true
			}
		}
		if !moved {
			break
		}
	}
	if len(rs) == 0 {
		return nil
	}
	out := make([]Diagnosis, len(rs))
	for i, r := range rs {
		out[i] = m.snapshot(r.st)
		if r.tier == 1 && i > 0 {
			// A watchdog timeout or an OOM after a specific failure: say so,
			// or its own advice ("an application stall") misleads.
			out[i].Cause = "Seen after the " + out[0].ID + " failure above, and most likely a consequence of it. " + out[i].Cause
		}
	}
	return out
}

// specificBefore reports whether a non-generic, non-knock-on cause was
// first seen before seq.
func (m *Matcher) specificBefore(seq int) bool {
	for _, st := range m.order {
		if m.isActive(st) && !st.ce.Generic && !st.ce.KnockOn && m.firstSeq(st) < seq {
			return true
		}
	}
	return false
}

// Explain reads a saved log (any bytes, any length) and returns its
// diagnoses, ranked as Diagnoses does. Lines longer than MaxLine are cut
// and their rest skipped. The only error is one from r (wrapped).
func Explain(r io.Reader, f Facts) ([]Diagnosis, error) {
	m := NewMatcher(f)
	if err := FeedReader(m, r); err != nil {
		return m.Diagnoses(), err
	}
	return m.Diagnoses(), nil
}

// FeedReader feeds every line of r to m (lines over MaxLine cut, the rest
// of such a line skipped). It returns r's error other than io.EOF, wrapped.
func FeedReader(m *Matcher, r io.Reader) error {
	br := bufio.NewReaderSize(r, MaxLine)
	skipping := false
	for {
		b, err := br.ReadSlice('\n')
		if len(b) > 0 && !skipping {
			m.Feed(b)
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			skipping = true
			continue
		case err == nil:
			skipping = false
			continue
		case errors.Is(err, io.EOF):
			return nil
		default:
			return fmt.Errorf("read log: %w", err)
		}
	}
}

// TerminationMessage renders the most important diagnosis (headline,
// cause, fix) and the ids of the others in at most limit bytes (valid
// UTF-8, cut at a rune boundary), for Kubernetes' /dev/termination-log
// (4096 bytes read). It returns "" for no diagnoses or limit <= 0.
func TerminationMessage(ds []Diagnosis, limit int) string {
	if len(ds) == 0 || limit <= 0 {
		return ""
	}
	d := ds[0]
	var b strings.Builder
	fmt.Fprintf(&b, "ncclrun: %s (%s", d.Title, d.ID)
	if d.Count > 0 {
		fmt.Fprintf(&b, ", %d process", d.Count)
		if d.Count != 1 {
			b.WriteString("es")
		}
	}
	if len(d.Hosts) > 0 {
		hs := d.Hosts
		more := ""
		if len(hs) > 8 {
			more = fmt.Sprintf(" and %d more", len(hs)-8)
			hs = hs[:8]
		}
		fmt.Fprintf(&b, " on %s%s", strings.Join(hs, ", "), more)
	}
	b.WriteString(")\n")
	b.WriteString("fix: " + d.Fix + "\n")
	if len(ds) > 1 {
		ids := make([]string, 0, len(ds)-1)
		for _, o := range ds[1:] {
			ids = append(ids, o.ID)
		}
		b.WriteString("also: " + strings.Join(ids, ", ") + "\n")
	}
	if d.Cause != "" {
		b.WriteString("cause: " + d.Cause + "\n")
	}
	if d.FirstLine != "" {
		b.WriteString("first: " + d.FirstLine + "\n")
	}
	return cut(b.String(), limit)
}

// cut shortens s to at most n bytes at a rune boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// firstLine is the text kept for Diagnosis.FirstLine: from the start of
// NCCL's prefix (or of the \r-separated segment holding the match, with
// collector prefixes stripped), valid UTF-8, at most maxFirstLine bytes.
func firstLine(p *cpattern, line []byte, pl Line) string {
	b := line
	if loc := p.re.FindIndex(line); loc != nil {
		start := 0
		for i := loc[0] - 1; i >= 0; i-- {
			if line[i] == '\r' {
				start = i + 1
				break
			}
		}
		if pl.Start >= start && pl.Start <= loc[0] {
			start = pl.Start
		}
		b = line[start:]
		if pl.Start != start {
			b = stripCollector(b)
		}
	}
	s := strings.TrimSpace(strings.ToValidUTF8(string(b), "\uFFFD"))
	return cut(s, maxFirstLine)
}

// formatSize renders bytes as "64 MiB" (binary units).
func formatSize(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	f := float64(n)
	i := 0
	for f >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%d B", n)
	}
	s := strconv.FormatFloat(f, 'f', 1, 64)
	s = strings.TrimSuffix(s, ".0")
	return s + " " + units[i]
}
