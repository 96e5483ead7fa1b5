package diagnosis

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"regexp/syntax"
	"sort"
	"strings"
	"sync"

	"github.com/ncclrun/ncclrun/internal/advice"
	"github.com/ncclrun/ncclrun/internal/lazy"
)

//go:embed catalog/*.json
var shippedFiles embed.FS

// shippedCatalog is the directory of the shipped catalog: one entry per
// file (ParseCatalogFS).
var shippedCatalog = mustSub(shippedFiles, "catalog")

func mustSub(fsys fs.FS, dir string) fs.FS {
	sub, err := fs.Sub(fsys, dir)
	if err != nil {
		panic(err)
	}
	return sub
}

// Certainty values of Entry.Certainty, Pattern.Certainty and Diagnosis.Certainty.
const (
	Certain = "certain"
	Likely  = "likely"
)

// Values of Entry.Facts: which preflight facts sharpen the entry's message.
const (
	// FactsMemlock: with Facts.Known && MemlockAdequate a sighting is
	// recorded under Entry.AdequateID instead; with Known && !MemlockAdequate
	// it is certain and names Facts.Seen and uses Facts.MemlockFix; without
	// facts it is likely, with a How that says how to tell.
	FactsMemlock = "memlock"
	// FactsMemoryRegistration: the cause names Facts.Seen when known.
	FactsMemoryRegistration = "memory-registration"
	// FactsShm: the cause names the size of /dev/shm (Facts.ShmBytes).
	FactsShm = "shm"
	// FactsTransport: the cause names the usable RDMA ports preflight saw
	// (Facts.RDMAPorts) when it saw some.
	FactsTransport = "transport"
)

// Values of Pattern.Unless.
const (
	// UnlessNoRDMA: ignore the pattern when Facts.Known && Facts.NoRDMA.
	UnlessNoRDMA = "no-rdma"
	// UnlessIBDisabled: ignore the pattern when Facts.Known &&
	// Facts.IBDisabled.
	UnlessIBDisabled = "ib-disabled"
)

// Values of Pattern.When: the pattern counts only under these facts (run
// knows them; explain never does), so it can say for certain what a log
// alone leaves open. It is tried in priority order like any pattern, and
// when its facts do not hold the line goes to the next pattern.
const (
	// WhenRDMAUsable: preflight saw a usable RDMA port (Facts.RDMAPorts).
	WhenRDMAUsable = "rdma-usable"
	// WhenPeermemLoaded: the host has nvidia-peermem and no nv_mem entry
	// (Facts.GDRModule == GDRModuleNvidiaPeermem).
	WhenPeermemLoaded = "peermem-loaded"
	// WhenNoPeermem: no peer-memory module at all (GDRModuleNone).
	WhenNoPeermem = "no-peermem"
)

// ErrCatalog is wrapped by every error ParseCatalog and NewCatalog return.
var ErrCatalog = errors.New("bad diagnosis catalog")

// Entry is one failure cause of the catalog (one file of diagnosis/catalog/,
// or one element of "entries" in ParseCatalog's format). Its zero value is not a valid entry: ID, Title, Cause,
// Fix and at least one pattern (or AdequateID pointing at it) are needed.
type Entry struct {
	// ID is the diagnosis id (docs/contract.md "Diagnosis ids", or an id
	// added in docs/diagnosis.md). Unique in a catalog.
	ID string `json:"id"`
	// Title is the one-line headline.
	Title string `json:"title"`
	// Priority orders causes: higher is more specific / more likely the
	// root cause. Entries at 50 or more are failures; below 50 they are
	// observations (a fallback that costs performance). A pattern may
	// override it.
	Priority int `json:"priority"`
	// Cause and Fix are the default explanation and remedy; a pattern may
	// override either.
	Cause string `json:"cause"`
	Fix   string `json:"fix"`
	// Certainty is Certain or Likely (default Certain); How says how to be
	// sure when Likely.
	Certainty string `json:"certainty,omitempty"`
	How       string `json:"how,omitempty"`
	// Facts names the preflight facts that change the message
	// (FactsMemlock, FactsMemoryRegistration, FactsShm) or is empty.
	Facts string `json:"facts,omitempty"`
	// AdequateID is where FactsMemlock sightings go when preflight saw an
	// adequate locked-memory allowance.
	AdequateID string `json:"adequate_id,omitempty"`
	// AdequateMarker names a marker of this entry (the log printing an
	// unlimited locked-memory limit, e.g. `ulimit -a`): without run's
	// facts, a sighting made while it is on goes to AdequateID too.
	AdequateMarker string `json:"adequate_marker,omitempty"`
	// FactCause replaces Cause, and FactNote is appended to it, when every
	// fact the template names is known (templates.go: {seen}, {shm_size},
	// {rdma_ports}): what run saw says it in one sentence, the catalog's
	// general explanation is for a log read without it. UnknownHow is the
	// How of a FactsMemlock diagnosis made without run's facts.
	FactCause  string `json:"fact_cause,omitempty"`
	FactNote   string `json:"fact_note,omitempty"`
	UnknownHow string `json:"unknown_how,omitempty"`
	// KnockOn marks causes that are often consequences of another failure
	// (a watchdog timeout, a CUDA OOM): they rank after any non-generic
	// cause first seen before them, and then KnockOnNote (a template
	// naming {failure}, the id ranked first; required with KnockOn) is put
	// before their cause.
	KnockOn     bool   `json:"knock_on,omitempty"`
	KnockOnNote string `json:"knock_on_note,omitempty"`
	// FoldKnockOn leaves a KnockOn cause out of Diagnoses when it ranks
	// after another cause, whose consequence it is (a lost peer: the peer
	// that went away is the rank that failed, and that failure is the
	// diagnosis). Alone, or after a program's exception, it is reported.
	FoldKnockOn bool `json:"fold_knock_on,omitempty"`
	// After lists ids this entry ranks after when both were seen (for
	// every pattern; Pattern.After adds ids for one pattern).
	After []string `json:"after,omitempty"`
	// Generic marks a catch-all (nccl-error): it ranks last and is left
	// out of Diagnoses when an active non-generic cause of priority
	// HiddenBy or more exists (a failure, not an observation; 0 means
	// never). HeldBack asks run to print it only at exit, when nothing
	// hid it (PyTorch's DistBackendError often arrives before the WARN that
	// names the cause): Catalog.HeldBack.
	Generic  bool `json:"generic,omitempty"`
	HiddenBy int  `json:"hidden_by,omitempty"`
	HeldBack bool `json:"held_back,omitempty"`
	// Not are negative patterns: a line matching any of them is not a
	// sighting of this entry.
	Not []string `json:"not,omitempty"`
	// Patterns are tried in catalog order within the entry.
	Patterns []Pattern `json:"patterns"`
	// SampleFacts are the facts the samples are checked under (the zero
	// Facts when absent).
	SampleFacts *SampleFacts `json:"sample_facts,omitempty"`
	// Samples are checked by the tests: every Match sample (lines joined by
	// "\n") gives this id as the first diagnosis, no NoMatch sample gives
	// it at all.
	Samples Samples `json:"samples"`
}

// Pattern is one regular expression of an entry (Go RE2 syntax, case
// sensitive unless it starts with (?i)). It is tried against a line's
// text (collector prefixes included; a raw NCCL line's host:pid:tid not)
// only when the text contains one of Literals.
type Pattern struct {
	// Name identifies the pattern inside its entry (Requires and
	// CertainWith refer to marker names).
	Name string `json:"name"`
	// Re is the regular expression.
	Re string `json:"re"`
	// Literals are substrings of which every match contains at least one,
	// derived from Re when the catalog is compiled (derive.go), never
	// written: they drive the prefilter.
	Literals []string `json:"-"`
	// Not are negative patterns for this pattern only.
	Not []string `json:"not,omitempty"`
	// Marker patterns record that they were seen (for Requires and
	// CertainWith) and are never a sighting themselves.
	Marker bool `json:"marker,omitempty"`
	// MultiHost markers are also on once lines of two different hosts
	// (NCCL's host:pid:tid prefix, ParseLine) were seen: the job spans
	// nodes even when NCCL printed no nNodes or channel line yet.
	MultiHost bool `json:"multi_host,omitempty"`
	// SingleHost markers are also on once NCCL lines of two processes of
	// one host were seen before any line of another host: several ranks
	// on one host and none elsewhere is a single-node job (a MultiHost
	// marker in its SuppressedBy turns it off when a second host shows).
	SingleHost bool `json:"single_host,omitempty"`
	// Requires names a marker that must be on (seen somewhere in the
	// output, before or after, and not suppressed) for sightings of this
	// pattern to count. A marker name is a marker of the same entry, or
	// "entry-id/marker-name" for another entry's.
	Requires string `json:"requires,omitempty"`
	// CertainWith names a marker that, once on, makes this pattern's
	// sightings certain.
	CertainWith string `json:"certain_with,omitempty"`
	// SuppressedBy names markers that, once on, void this pattern: its
	// sightings stop counting (a cause seen only through it is dropped
	// from Diagnoses), and a marker that is suppressed is off. Suppression
	// follows the whole output: a later line can suppress or release an
	// earlier sighting. Cycles are a catalog error.
	SuppressedBy []string `json:"suppressed_by,omitempty"`
	// After lists ids this pattern's sightings rank after (added to the
	// entry's After): the entry ranks after such an id when every active
	// sighting of it lists that id.
	After []string `json:"after,omitempty"`
	// Unless names a fact (UnlessNoRDMA, UnlessIBDisabled) under which the
	// pattern is ignored.
	Unless string `json:"unless,omitempty"`
	// When names facts (WhenRDMAUsable, WhenPeermemLoaded, WhenNoPeermem)
	// without which the pattern is ignored.
	When string `json:"when,omitempty"`
	// Benign marks a line that healthy jobs print (a missing libibverbs
	// on a node without RDMA, no device found, a tcp provider): unless one
	// of Needs holds, a cause seen only through such lines is left out of
	// Diagnoses beside any other cause, the generic nccl-error included,
	// and run prints it only at exit (Feed does not return it). Alone in
	// a log it is still reported, as the observation it is.
	Benign bool `json:"benign,omitempty"`
	// Needs are the conditions under which a Benign pattern counts, any
	// one of them enough: each is a fact name of When (WhenRDMAUsable,
	// ...) or a marker name, or several of them joined by "+", all of
	// which must hold ("socket-interface/multi-node+socket-fallback").
	// A fact holds only for a line of this host (Facts.Host).
	Needs []string `json:"needs,omitempty"`
	// CertainNeeds, in Needs' syntax, are the conditions under which a
	// sighting of this pattern is certain (any one of them enough): a
	// fact of this host or markers of a failure it explains. Without
	// them the pattern's Certainty applies.
	CertainNeeds []string `json:"certain_needs,omitempty"`
	// NotAfter names a marker (as Requires does) and NotAfterLines a
	// number of lines: within that many lines after the marker's line
	// the pattern does not claim a line (it goes to the next pattern).
	// torchrun's agent prints "Error waiting on exit barrier" and then
	// its traceback, whose store timeout is no failure of the job's.
	NotAfter      string `json:"not_after,omitempty"`
	NotAfterLines int    `json:"not_after_lines,omitempty"`
	// CommRank marks a marker whose "rank" group is the rank of the NCCL
	// process that printed the line (NCCL's `comm 0x... rank N nranks M`
	// INFO): a diagnosis first seen on a line of that process names the
	// rank in its first failure. Such a marker is looked for on every
	// line, as a windowed one is.
	CommRank bool `json:"comm_rank,omitempty"`
	// HostAddr marks a marker whose "addr" group is an address of the
	// host that printed the line (NCCL's `Bootstrap : Using eth0:ADDR<0>`,
	// `OOB eth0:ADDR<0>`): an error that names a peer at that address
	// (`peer ADDR<port>`) is a knock-on of a failure on that host. Looked
	// for on every line, as a windowed marker is.
	HostAddr bool `json:"host_addr,omitempty"`
	// Title overrides the entry's title for diagnoses first seen through
	// this pattern: the headline names whoever failed (Gloo, not NCCL).
	Title string `json:"title,omitempty"`
	// Priority, Certainty, How, Cause and Fix override the entry's when set;
	// Note is appended to the entry's cause.
	Priority  int    `json:"priority,omitempty"`
	Certainty string `json:"certainty,omitempty"`
	How       string `json:"how,omitempty"`
	Cause     string `json:"cause,omitempty"`
	Fix       string `json:"fix,omitempty"`
	Note      string `json:"note,omitempty"`
}

// SampleFacts are the Facts an entry's samples are checked under.
type SampleFacts struct {
	Known           bool     `json:"known"`
	MemlockAdequate bool     `json:"memlock_adequate"`
	NoRDMA          bool     `json:"no_rdma,omitempty"`
	Seen            string   `json:"seen,omitempty"`
	ShmBytes        int64    `json:"shm_bytes,omitempty"`
	RDMAPorts       []string `json:"rdma_ports,omitempty"`
	GDRModule       string   `json:"gdr_module,omitempty"`
}

// Facts converts s to Facts (the zero Facts for a nil s).
func (s *SampleFacts) Facts() Facts {
	if s == nil {
		return Facts{}
	}
	return Facts{Known: s.Known, MemlockAdequate: s.MemlockAdequate, NoRDMA: s.NoRDMA, Seen: s.Seen, ShmBytes: s.ShmBytes,
		RDMAPorts: s.RDMAPorts, GDRModule: s.GDRModule}
}

// Samples are an entry's test lines.
type Samples struct {
	Match   []string `json:"match"`
	NoMatch []string `json:"no_match"`
}

// catalogFile is the layout of ParseCatalog's single document.
type catalogFile struct {
	Version int     `json:"version"`
	Comment string  `json:"comment,omitempty"`
	Entries []Entry `json:"entries"`
}

// Catalog is a compiled, immutable set of entries; safe for concurrent
// use by any number of matchers. The zero value is not usable: build one
// with ParseCatalog, NewCatalog or DefaultCatalog.
type Catalog struct {
	entries []Entry
	cents   []*centry
	byID    map[string]*centry
	pats    []*cpattern // ordered by effective priority desc, then catalog order
	// ac is built from lits and owners on first use (automaton): a run
	// whose output never passes the gram filter never needs it.
	acOnce sync.Once
	ac     *ahoCorasick
	lits   []string
	owners []int
	ncand  int // patterns and summary literals: candidates' range
	// filter holds the grams of every pattern's literals (gram.go): a
	// line it rejects has no candidate.
	filter *gramFilter
	// wide is filter with the windowed markers' literals too (the scan
	// of a chunk for lines to feed); windowed are their indices, matched
	// on their own (Matcher.sideLine): a healthy job's comm and
	// Bootstrap lines never reach the automaton.
	wide     *gramFilter
	windowed []int
	// multiHost and singleHost are the indices of the MultiHost and
	// SingleHost markers.
	multiHost, singleHost []int
}

// centry is a compiled entry.
type centry struct {
	Entry
	idx int
	// not and notLit are Not compiled, on first use (ready).
	once    sync.Once
	err     error
	not     []guard
	notLit  [][]byte       // negative patterns that are plain literals (searched, not run)
	markers map[string]int // marker name -> global pattern index
	// adequateMarker is AdequateMarker's global pattern index, -1 none.
	adequateMarker int
}

// cpattern is a compiled pattern.
type cpattern struct {
	Pattern
	idx   int // in Catalog.pats
	entry *centry
	// re, rePre, not and notLit are compiled from Re and Not
	// on first use (ready).
	once         sync.Once
	err          error
	re           *regexp.Regexp
	rePre        []byte // re's literal prefix, searched before re runs (match.go)
	not          []guard
	notLit       [][]byte // negative patterns that are plain literals
	prio         int
	certainty    string
	requires     int // global index of the required marker, -1 none
	certainWith  int // global index of the marker, -1 none
	suppressedBy []int
	after        map[string]bool // entry's After plus the pattern's
	needs        []needTerm      // Needs resolved (needsHold)
	certainNeeds []needTerm      // CertainNeeds resolved
	notAfter     int             // global index of NotAfter's marker, -1 none
	// windowed: a marker some NotAfter names; its line is kept each time
	// it is seen, so it never leaves the gram filter.
	windowed   bool
	peerGroup  int      // index of the "peer" group in re, -1 none (or not compiled yet)
	rankGroups []int    // indices of the "rank" groups in re: the rank waited for
	grams      litGrams // two grams per literal (gram.go)
	gramsOK    bool     // false: a literal is shorter than a gram
}

var (
	defaultOnce sync.Once
	defaultCat  *Catalog
)

// DefaultCatalog returns the catalog shipped in the binary
// (diagnosis/catalog/*.json), compiled once. The shipped catalog is checked
// by the tests; a broken one panics with the error, quoting the pattern.
func DefaultCatalog() *Catalog {
	defaultOnce.Do(func() {
		c, err := parseCatalogFS(shippedCatalog, true)
		if err != nil {
			panic(err)
		}
		defaultCat = c
	})
	return defaultCat
}

// catalogFileName is the name of one entry's file in a catalog directory:
// a three-digit rank, a dash, the entry's id. Files load in name order,
// which is the catalog order (ties of priority go to the earlier file).
// Compiled on first use: a start that prints nothing never loads a catalog.
var catalogFileName = &lazy.Regexp{Expr: `^([0-9]{3})-([a-z0-9-]+)\.json$`}

// ParseCatalogFS compiles the catalog held in the top directory of fsys:
// one entry per file named NNN-<id>.json (one JSON object in Entry's
// format, unknown fields rejected), loaded in file-name order. Other
// files are an error, and so is a file whose name does not carry its
// entry's id. Errors wrap ErrCatalog and quote the file.
func ParseCatalogFS(fsys fs.FS) (*Catalog, error) { return parseCatalogFS(fsys, false) }

// parseCatalogFS is ParseCatalogFS; with onFirstUse, each pattern's regular
// expressions are compiled on its first use instead of here (see
// newCatalog).
func parseCatalogFS(fsys fs.FS, onFirstUse bool) (*Catalog, error) {
	des, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCatalog, err)
	}
	entries := make([]Entry, 0, len(des))
	for _, de := range des { // fs.ReadDir sorts by name
		name := de.Name()
		m := catalogFileName.Get().FindStringSubmatch(name)
		if m == nil || !de.Type().IsRegular() {
			return nil, fmt.Errorf("%w: %q is not a regular file named NNN-<id>.json", ErrCatalog, name)
		}
		data, err := fs.ReadFile(fsys, path.Clean(name))
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrCatalog, err)
		}
		var e Entry
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrCatalog, name, err)
		}
		if dec.More() {
			return nil, fmt.Errorf("%w: %s: more than one JSON value", ErrCatalog, name)
		}
		if e.ID != m[2] {
			return nil, fmt.Errorf("%w: %s: holds entry %q, not %q", ErrCatalog, name, e.ID, m[2])
		}
		entries = append(entries, e)
	}
	return newCatalog(entries, onFirstUse)
}

// ParseCatalog compiles a catalog given as one JSON document
// ({"version": 1, "entries": [...]}, entries in catalog order). Errors wrap
// ErrCatalog and quote the offending entry and pattern.
func ParseCatalog(data []byte) (*Catalog, error) {
	var f catalogFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCatalog, err)
	}
	return NewCatalog(f.Entries)
}

// NewCatalog compiles entries. Errors wrap ErrCatalog: a duplicate or
// empty id, an entry without title/cause/fix, a pattern that does not
// compile (quoted), a pattern of which no literal is in every match
// (Pattern.Literals are derived, never given), an unknown marker name or
// certainty.
func NewCatalog(entries []Entry) (*Catalog, error) { return newCatalog(entries, false) }

// newCatalog is NewCatalog; with onFirstUse, the regular expressions of a
// pattern (and of its entry's negative patterns) are compiled when a line
// first reaches them, not here. Compiling all of them up front was most
// of the cost of loading the shipped catalog (run pays it on CMD's first
// line, explain before its first), while a log reaches a handful: the shipped catalog
// is compiled lazily, and a broken expression in it panics on first use;
// the tests compile it eagerly (ParseCatalogFS), so that it never does.
func newCatalog(entries []Entry, onFirstUse bool) (*Catalog, error) {
	c := &Catalog{byID: make(map[string]*centry, len(entries))}
	c.entries = append([]Entry(nil), entries...)
	for i := range c.entries {
		e := &c.entries[i]
		if e.ID == "" {
			return nil, fmt.Errorf("%w: entry %d has no id", ErrCatalog, i)
		}
		if _, dup := c.byID[e.ID]; dup {
			return nil, fmt.Errorf("%w: duplicate id %q", ErrCatalog, e.ID)
		}
		if e.Title == "" || e.Cause == "" || e.Fix == "" {
			return nil, fmt.Errorf("%w: entry %q needs title, cause and fix", ErrCatalog, e.ID)
		}
		// Fix texts shared with preflight live in internal/advice.
		var err error
		if e.Fix, err = advice.Expand(e.Fix); err != nil {
			return nil, fmt.Errorf("%w: entry %q: fix: %w", ErrCatalog, e.ID, err)
		}
		e.Patterns = append([]Pattern(nil), e.Patterns...)
		for j := range e.Patterns {
			if e.Patterns[j].Fix, err = advice.Expand(e.Patterns[j].Fix); err != nil {
				return nil, fmt.Errorf("%w: entry %q: pattern %d fix: %w", ErrCatalog, e.ID, j, err)
			}
		}
		if e.Certainty == "" {
			e.Certainty = Certain
		}
		if e.Certainty != Certain && e.Certainty != Likely {
			return nil, fmt.Errorf("%w: entry %q: certainty %q is not %q or %q", ErrCatalog, e.ID, e.Certainty, Certain, Likely)
		}
		if err := checkTemplates(e); err != nil {
			return nil, fmt.Errorf("%w: entry %q: %w", ErrCatalog, e.ID, err)
		}
		ce := &centry{Entry: *e, idx: i, markers: map[string]int{}, adequateMarker: -1}
		if !onFirstUse {
			if err := ce.ready(); err != nil {
				return nil, err
			}
		}
		c.byID[e.ID] = ce
		c.cents = append(c.cents, ce)
	}
	for _, ce := range c.cents {
		if ce.AdequateID != "" {
			if _, ok := c.byID[ce.AdequateID]; !ok {
				return nil, fmt.Errorf("%w: entry %q: adequate_id %q is not an entry", ErrCatalog, ce.ID, ce.AdequateID)
			}
		}
		if len(ce.Patterns) == 0 && !c.isAdequateTarget(ce.ID) {
			return nil, fmt.Errorf("%w: entry %q has no patterns", ErrCatalog, ce.ID)
		}
		for j := range ce.Patterns {
			p := ce.Patterns[j]
			cp, err := compilePattern(ce, p, onFirstUse)
			if err != nil {
				return nil, err
			}
			c.pats = append(c.pats, cp)
		}
	}
	sort.SliceStable(c.pats, func(i, j int) bool { return c.pats[i].prio > c.pats[j].prio })
	for i, cp := range c.pats {
		cp.idx = i
		if cp.Marker {
			cp.entry.markers[cp.Name] = i
		}
		if cp.MultiHost {
			if !cp.Marker {
				return nil, fmt.Errorf("%w: entry %q pattern %q: multi_host needs marker", ErrCatalog, cp.entry.ID, cp.Name)
			}
			c.multiHost = append(c.multiHost, i)
		}
		if cp.SingleHost {
			if !cp.Marker {
				return nil, fmt.Errorf("%w: entry %q pattern %q: single_host needs marker", ErrCatalog, cp.entry.ID, cp.Name)
			}
			c.singleHost = append(c.singleHost, i)
		}
	}
	for _, ce := range c.cents {
		if ce.AdequateMarker == "" {
			continue
		}
		i, ok := ce.markers[ce.AdequateMarker]
		if !ok || ce.AdequateID == "" {
			return nil, fmt.Errorf("%w: entry %q: adequate_marker %q is not a marker of the entry (or no adequate_id)", ErrCatalog, ce.ID, ce.AdequateMarker)
		}
		ce.adequateMarker = i
	}
	for _, cp := range c.pats {
		var err error
		if cp.requires, err = c.markerIndex(cp, cp.Requires); err != nil {
			return nil, err
		}
		if cp.certainWith, err = c.markerIndex(cp, cp.CertainWith); err != nil {
			return nil, err
		}
		if cp.needs, err = c.needTerms(cp, cp.Needs); err != nil {
			return nil, err
		}
		if cp.certainNeeds, err = c.needTerms(cp, cp.CertainNeeds); err != nil {
			return nil, err
		}
		if cp.notAfter, err = c.markerIndex(cp, cp.NotAfter); err != nil {
			return nil, err
		}
		if cp.CommRank || cp.HostAddr {
			if !cp.Marker {
				return nil, fmt.Errorf("%w: entry %q pattern %q: comm_rank and host_addr need marker", ErrCatalog, cp.entry.ID, cp.Name)
			}
			cp.windowed = true
		}
		if cp.notAfter >= 0 {
			if cp.NotAfterLines <= 0 {
				return nil, fmt.Errorf("%w: entry %q pattern %q: not_after needs not_after_lines > 0", ErrCatalog, cp.entry.ID, cp.Name)
			}
			c.pats[cp.notAfter].windowed = true
		}
		for _, name := range cp.SuppressedBy {
			i, err := c.markerIndex(cp, name)
			if err != nil {
				return nil, err
			}
			if i < 0 {
				return nil, fmt.Errorf("%w: entry %q pattern %q: empty suppressed_by name", ErrCatalog, cp.entry.ID, cp.Name)
			}
			cp.suppressedBy = append(cp.suppressedBy, i)
		}
	}
	if err := c.checkSuppressionCycles(); err != nil {
		return nil, err
	}
	var lits []string
	var owners []int
	for _, cp := range c.pats {
		for _, l := range cp.Literals {
			lits = append(lits, l)
			owners = append(owners, cp.idx)
		}
	}
	// The torchrun summary's literals (torchrun.go) follow the patterns'
	// indices: a candidate >= len(c.pats) is one of them.
	for k, l := range summaryLits {
		lits = append(lits, l)
		owners = append(owners, len(c.pats)+k)
	}
	c.lits, c.owners, c.ncand = lits, owners, len(c.pats)+len(summaryLits)
	if !onFirstUse {
		c.automaton()
	}
	gc := newGramChooser()
	for _, cp := range c.pats {
		cp.grams, cp.gramsOK = gc.patternGrams(&cp.Pattern)
	}
	c.filter = buildGramFilter(c.pats, func(i int) bool { return !c.pats[i].windowed })
	c.wide = buildGramFilter(c.pats, func(int) bool { return true })
	for i, cp := range c.pats {
		if cp.windowed {
			c.windowed = append(c.windowed, i)
		}
	}
	return c, nil
}

// automaton is the catalog's Aho-Corasick automaton over every literal,
// built on first use (~1.2 ms for the shipped catalog: most of what is
// left of its compile, paid at the exit of a short job that printed a
// line or two otherwise).
func (c *Catalog) automaton() *ahoCorasick {
	c.acOnce.Do(func() { c.ac = newAhoCorasick(c.lits, c.owners) })
	return c.ac
}

func (c *Catalog) isAdequateTarget(id string) bool {
	for _, ce := range c.cents {
		if ce.AdequateID == id {
			return true
		}
	}
	return false
}

func compilePattern(ce *centry, p Pattern, onFirstUse bool) (*cpattern, error) {
	where := fmt.Sprintf("entry %q pattern %q", ce.ID, p.Name)
	t, err := syntax.Parse(p.Re, syntax.Perl) // as regexp.Compile parses it
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %q: %w", ErrCatalog, where, p.Re, err)
	}
	lits, ok := literalsOf(t)
	if !ok {
		return nil, fmt.Errorf("%w: %s: %q: no literal is in every match, for the prefilter", ErrCatalog, where, p.Re)
	}
	p.Literals = lits
	cp := &cpattern{Pattern: p, entry: ce, prio: ce.Priority, certainty: ce.Certainty, requires: -1, certainWith: -1, after: map[string]bool{}}
	for _, a := range ce.After {
		cp.after[a] = true
	}
	for _, a := range p.After {
		cp.after[a] = true
	}
	if p.Priority != 0 {
		cp.prio = p.Priority
	}
	if p.Certainty != "" {
		if p.Certainty != Certain && p.Certainty != Likely {
			return nil, fmt.Errorf("%w: %s: certainty %q", ErrCatalog, where, p.Certainty)
		}
		cp.certainty = p.Certainty
	}
	if p.Unless != "" && p.Unless != UnlessNoRDMA && p.Unless != UnlessIBDisabled {
		return nil, fmt.Errorf("%w: %s: unknown unless %q", ErrCatalog, where, p.Unless)
	}
	switch p.When {
	case "", WhenRDMAUsable, WhenPeermemLoaded, WhenNoPeermem:
	default:
		return nil, fmt.Errorf("%w: %s: unknown when %q", ErrCatalog, where, p.When)
	}
	if len(p.Needs) > 0 && !p.Benign {
		return nil, fmt.Errorf("%w: %s: needs without benign", ErrCatalog, where)
	}
	if !onFirstUse {
		if err := cp.ready(); err != nil {
			return nil, err
		}
	}
	return cp, nil
}

// ready compiles p's regular expressions (Re, Not) once;
// the error, quoting the expression, wraps ErrCatalog.
func (p *cpattern) ready() error {
	p.once.Do(func() { p.err = p.compileRegexps() })
	return p.err
}

// mustReady is ready where the catalog is known to compile (the shipped
// one is compiled eagerly by the tests).
func (p *cpattern) mustReady() {
	if err := p.ready(); err != nil {
		panic(err)
	}
}

// regexp is p's expression, compiled.
func (p *cpattern) regexp() *regexp.Regexp {
	p.mustReady()
	return p.re
}

func (p *cpattern) compileRegexps() error {
	where := fmt.Sprintf("entry %q pattern %q", p.entry.ID, p.Name)
	re, err := regexp.Compile(p.Re)
	if err != nil {
		return fmt.Errorf("%w: %s: %q: %w", ErrCatalog, where, p.Re, err)
	}
	p.re, p.rePre = re, literalPrefix(re)
	p.peerGroup = re.SubexpIndex("peer")
	for i, n := range re.SubexpNames() {
		if n == "rank" {
			p.rankGroups = append(p.rankGroups, i)
		}
	}
	for _, n := range p.Not {
		nre, err := regexp.Compile(n)
		if err != nil {
			return fmt.Errorf("%w: %s: negative pattern %q: %w", ErrCatalog, where, n, err)
		}
		p.not, p.notLit = addNot(p.not, p.notLit, nre)
	}
	return nil
}

// ready compiles the entry's negative patterns once (cpattern.ready).
func (ce *centry) ready() error {
	ce.once.Do(func() {
		for _, n := range ce.Not {
			re, err := regexp.Compile(n)
			if err != nil {
				ce.err = fmt.Errorf("%w: entry %q: negative pattern %q: %w", ErrCatalog, ce.ID, n, err)
				return
			}
			ce.not, ce.notLit = addNot(ce.not, ce.notLit, re)
		}
	})
	return ce.err
}

func (ce *centry) mustReady() {
	if err := ce.ready(); err != nil {
		panic(err)
	}
}

// addNot files a compiled negative pattern: one that is a plain literal
// (regexp.LiteralPrefix complete) goes to lits, to be searched with
// bytes.Contains before the pattern's own regular expression runs (same
// result, a fraction of the cost); the others to res.
func addNot(res []guard, lits [][]byte, re *regexp.Regexp) ([]guard, [][]byte) {
	if lit, complete := re.LiteralPrefix(); complete && lit != "" {
		return res, append(lits, []byte(lit))
	}
	return append(res, guard{re: re, pre: literalPrefix(re)}), lits
}

// markerIndex resolves a marker name ("name" in cp's entry, or
// "entry-id/name") to its global pattern index; -1 for "".
func (c *Catalog) markerIndex(cp *cpattern, name string) (int, error) {
	if name == "" {
		return -1, nil
	}
	ce, short := cp.entry, name
	if id, n, ok := strings.Cut(name, "/"); ok {
		other, found := c.byID[id]
		if !found {
			return -1, fmt.Errorf("%w: entry %q pattern %q: marker %q: no entry %q", ErrCatalog, cp.entry.ID, cp.Name, name, id)
		}
		ce, short = other, n
	}
	i, ok := ce.markers[short]
	if !ok {
		return -1, fmt.Errorf("%w: entry %q pattern %q: %q is not a marker of entry %q", ErrCatalog, cp.entry.ID, cp.Name, short, ce.ID)
	}
	return i, nil
}

// needTerm is one element of Pattern.Needs: facts and markers that must
// all hold.
type needTerm struct {
	facts   []string
	markers []int
}

// needTerms resolves cp's Needs: each "+"-joined part is a When fact or
// a marker name (markerIndex).
func (c *Catalog) needTerms(cp *cpattern, needs []string) ([]needTerm, error) {
	var ts []needTerm
	for _, n := range needs {
		var t needTerm
		for _, part := range strings.Split(n, "+") {
			switch part {
			case WhenRDMAUsable, WhenPeermemLoaded, WhenNoPeermem:
				t.facts = append(t.facts, part)
				continue
			case "":
				return nil, fmt.Errorf("%w: entry %q pattern %q: empty need in %q", ErrCatalog, cp.entry.ID, cp.Name, n)
			}
			i, err := c.markerIndex(cp, part)
			if err != nil {
				return nil, err
			}
			t.markers = append(t.markers, i)
		}
		ts = append(ts, t)
	}
	return ts, nil
}

// checkSuppressionCycles rejects markers that suppress themselves through
// a chain of suppressed_by, so that a marker's state is always defined.
func (c *Catalog) checkSuppressionCycles() error {
	const (
		unvisited = iota
		visiting
		done
	)
	state := make([]int, len(c.pats))
	var visit func(i int) error
	visit = func(i int) error {
		switch state[i] {
		case visiting:
			p := c.pats[i]
			return fmt.Errorf("%w: entry %q marker %q: suppressed_by forms a cycle", ErrCatalog, p.entry.ID, p.Name)
		case done:
			return nil
		}
		state[i] = visiting
		for _, j := range c.pats[i].suppressedBy {
			if err := visit(j); err != nil {
				return err
			}
		}
		state[i] = done
		return nil
	}
	for i := range c.pats {
		if err := visit(i); err != nil {
			return err
		}
	}
	return nil
}

// Entries returns a copy of the catalog's entries in catalog order.
func (c *Catalog) Entries() []Entry {
	out := make([]Entry, len(c.entries))
	copy(out, c.entries)
	return out
}

// Entry returns the entry with this id.
func (c *Catalog) Entry(id string) (Entry, bool) {
	ce, ok := c.byID[id]
	if !ok {
		return Entry{}, false
	}
	return ce.Entry, true
}

// HeldBack reports whether run holds diagnosis id back while the command
// runs (Entry.HeldBack), printing it at exit only if nothing hid it.
func (c *Catalog) HeldBack(id string) bool {
	ce, ok := c.byID[id]
	return ok && ce.HeldBack
}
