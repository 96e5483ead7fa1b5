package diagnosis

import (
	"bytes"
	"hash/maphash"
	"strings"

	"github.com/ncclrun/ncclrun/internal/printable"
)

// state is one cause being collected. Everything it remembers per process,
// host or text is bounded (see the caps below and Matcher.room): a log
// with more distinct processes than the caps still counts them exactly up
// to the cap and then says "at least" (capped).
type state struct {
	ce     *centry
	sights []sight // one per pattern, in order of first sighting
	lines  int
	// procs are the processes that printed a matching line with NCCL's
	// host:pid prefix; tprocs those that torchrun's failure summary named
	// for a matching line of their reprinted traceback (torchrun.go).
	procs  map[procID]struct{}
	tprocs map[procID]struct{}
	// wtext maps the message text (hashed) of each identified process's
	// matching line to the processes that printed it, for recognising
	// PyTorch's echoes and the traceback a worker printed before torchrun
	// reprinted it.
	wtext map[uint64]map[procID]struct{}
	npair int // entries in wtext's sets
	// utext counts the units of matching lines that name no process: an
	// exception's lines (a header and its continuation lines, see block)
	// count as one unit, keyed by the first line's text (and Ray/vLLM
	// process, when its prefix names one).
	utext map[utextKey]*unit
	blk   block
	hosts map[string]struct{}
	// peers are the lost peers' addresses the lines named (at most maxPeers).
	peers []string
	// peerTails are the texts addPeer read already (peerTail), at most
	// maxPeerTails: one seen again adds no peer.
	peerTails map[peerTail]struct{}
	// capped: a process or text was left out because a cap was reached, so
	// count is a lower bound; hostsCapped: a host was left out.
	capped, hostsCapped bool
	// textsLost: a text, or a process that printed it, was left out by a
	// cap, so a unit repeating it cannot be told from a process of its
	// own: count then counts only the processes it knows (and is capped).
	textsLost bool
	// announced: returned by Feed/FeedAll once (or skipped there as a
	// generic cause hidden by a failure).
	announced bool
}

type sight struct {
	p         *cpattern
	seq       int
	firstLine string
	// local: the line is this host's (Matcher.isLocal), so run's facts
	// apply to it; place is where it came from.
	local bool
	place Place
	// proc is the NCCL process that printed it (host:pid prefix), the
	// zero procID for another line.
	proc procID
	// hostless: the line showed no host; repeat: it turned out to repeat
	// another host's NCCL WARN seen later (Matcher.noteRemoteWarn), so it
	// is that host's failure, counted there, and this sighting no longer
	// speaks for this host.
	hostless, repeat bool
}

// procID names a process: the hash of its host (0 when the host is not
// known, as for a Ray "pid=N" without ip or torchrun's "localhost") and
// its pid.
type procID struct {
	host uint64
	pid  int64
}

// utextKey is an unidentified unit's first text (hashed) and the Ray/vLLM
// process named by its prefix (zero when none).
type utextKey struct {
	text uint64
	proc procID
}

// unit is the lines of one unidentified unit key: n units, and the hashes
// of the first line's text and of its ends from a word boundary in the
// first maxEchoPrefix bytes (echo candidates, at most maxCands).
type unit struct {
	n     int
	cands []uint64
}

// block is the unidentified unit being read: a Python exception header
// ("RuntimeError: NCCL error in: ...") and the lines that follow it
// within maxGap lines ("ncclSystemError: ...", the "Last error:" text)
// are one process's message, not one process each.
type block struct {
	on    bool
	last  int // line number of its last line
	proc  procID
	cands []uint64 // echo candidates of its lines (bounded)
}

// Caps on what one state remembers, and on what one matcher's states
// remember together (Matcher.room). The matcher-wide budgets keep the
// memory bounded whatever the catalog's size; a state past either counts
// exactly up to it and is marked capped. What each keeps exact:
const (
	// maxProcs: a cause every rank of a 512-node job of 8 GPUs reports
	// (a larger one reads "4096+ processes").
	maxProcs = 4096
	// maxHosts: every host of a 1,000-node job.
	maxHosts = 1024
	// maxTexts: distinct texts of one cause (a text that names a port or
	// an address differs from process to process).
	maxTexts = 1024
	// maxTextPairs: four texts for each process counted (maxProcs), so
	// that PyTorch's echo of a rank's last WARN text is told apart from a
	// process of its own while the count is exact, when every rank
	// printed a line for each of its connections (texts that differ by
	// peer and port). Past it, or past roomPairs, the cause's count keeps
	// only the processes it knows and reads as a lower bound (textsLost).
	maxTextPairs = 4 * maxProcs
	maxHostLen   = 64 // a DNS label is at most 63 bytes (RFC 1035)

	// roomProcs: four causes at maxProcs (a failure and three knock-ons
	// every rank reports: a lost peer, the proxy's error, NCCL's generic
	// error).
	roomProcs = 4 * maxProcs
	// roomHosts: four causes on every host of a 1,000-node job.
	roomHosts = 4 * maxHosts
	roomTexts = 4 * maxTexts
	// roomPairs: the causes together, one cause's maxTextPairs (a cause
	// every rank of a 512-node job reports, four texts a process). A pair
	// costs 16 bytes and a map slot: on a log of a million processes each
	// doubling of it adds about a megabyte of peak RSS (at four times this
	// the pairs would be most of a matcher's memory).
	roomPairs = maxTextPairs

	// maxEchoPrefix is how far into an unprefixed line the echoed WARN
	// text may start (after a collector's own words, e.g. pdsh's "host: ").
	maxEchoPrefix = 96
	maxCands      = 16
	// maxGlue is how many glue points of a line give echo candidates
	// (echoCands): a line holds the texts of a few ranks at most.
	maxGlue       = 8
	maxBlockCands = 64
	// maxGap is how many lines after the last line of an exception its
	// continuation may come (a "Last error:" line between them).
	maxGap = 3
)

// room is what a matcher's states may still add together.
type room struct{ procs, hosts, texts, pairs int }

func newRoom() room {
	return room{procs: roomProcs, hosts: roomHosts, texts: roomTexts, pairs: roomPairs}
}

var hashSeed = maphash.MakeSeed()

func hashBytes(b []byte) uint64  { return maphash.Bytes(hashSeed, b) }
func hashString(s string) uint64 { return maphash.String(hashSeed, s) }

func newState(ce *centry) *state {
	return &state{ce: ce, procs: map[procID]struct{}{}, tprocs: map[procID]struct{}{},
		wtext: map[uint64]map[procID]struct{}{}, utext: map[utextKey]*unit{}, hosts: map[string]struct{}{}}
}

// record counts a sighting of p on a line; it returns the cause's state.
func (m *Matcher) record(p *cpattern, v *lineView, local bool) *state {
	ce := p.entry
	if ce.Facts == FactsMemlock && ce.AdequateID != "" && m.memlockAdequate(ce, local) {
		ce = m.cat.byID[ce.AdequateID]
	}
	st := m.states[ce.ID]
	if st == nil {
		st = newState(ce)
		m.states[ce.ID] = st
		m.order = append(m.order, st)
	}
	st.lines++
	line := v.line
	if v.raw {
		// The common case, counted without allocating: a raw NCCL line.
		id := v.proc()
		m.addProc(st, st.procs, id)
		m.addText(st, v.textHash(), id)
		st.blk.on = false
		m.addHostBytes(st, v.host())
		return m.sighted(st, p, v, local)
	}
	pl := v.parse()
	switch {
	case pl.Start >= 0 && pl.Host != "" && pl.PID != 0:
		id := procID{hashString(pl.Host), int64(pl.PID)}
		m.addProc(st, st.procs, id)
		m.addText(st, hashString(strings.TrimSpace(pl.Msg)), id)
		st.blk.on = false
		m.addHost(st, pl.Host)
	case pl.Start < 0 && m.sum.attributes(line, m.lineNo):
		// A line of a traceback torchrun's failure summary reprints: the
		// process the summary names, not one more.
		m.sum.last = m.lineNo
		id := m.sum.proc()
		m.addProc(st, st.tprocs, id)
		m.addText(st, hashBytes(summaryText(line)), id)
		st.blk.on = false
		if m.sum.hostName != "" {
			m.addHost(st, m.sum.hostName)
		}
	default:
		var proc procID
		if pl.PID != 0 {
			proc.pid = int64(pl.PID)
			if pl.Host != "" {
				proc.host = hashString(pl.Host)
			}
		} else if r, ok := rankTag(line); ok {
			// torchrun's "[rank1]:" (mpirun's "[1,1]<stderr>:"): that
			// rank's process, so two ranks' identical exceptions count two
			// even when their lines interleave.
			proc = procID{host: rankHost, pid: int64(r)}
		}
		m.addBare(st, line, proc)
		if pl.Host != "" {
			m.addHost(st, pl.Host)
		}
	}
	return m.sighted(st, p, v, local)
}

// sighted records the first sighting of p in st (with its first line and
// place) and the peers a line names (pattern group "peer").
func (m *Matcher) sighted(st *state, p *cpattern, v *lineView, local bool) *state {
	line := v.line
	if p.peerGroup >= 0 && len(st.peers) < maxPeers {
		m.addPeer(st, p, v.text)
	}
	for i := range st.sights {
		if s := &st.sights[i]; s.p == p {
			if !s.local && local {
				// Run's facts apply once this host printed it too.
				s.local = true
			}
			if s.hostless && v.parse().Host != "" {
				s.hostless = false
			}
			return st
		}
	}
	pl := v.parse()
	place := placeOf(line, pl)
	if place.Host == "" && m.sum.on && m.sum.hostName != "" {
		place.Host = m.sum.hostName
	}
	proc := v.lineProc()
	st.sights = append(st.sights, sight{p: p, seq: m.seq, firstLine: firstLine(p, line, pl), local: local, place: place,
		hostless: pl.Host == "", proc: proc})
	return st
}

// maxPeers bounds Diagnosis.Peers.
const maxPeers = 16

// maxPeerTails bounds state.peerTails.
const maxPeerTails = 256

// peerTail is a pattern and the hash of a line's text (lineView.text),
// of which the match and its peer are a function: a failing job's ranks
// print the same "closed by remote peer node-b<port>" under as many
// prefixes, and the expression runs once for them all (it costs a
// microsecond and a few allocations a line).
type peerTail struct {
	p    *cpattern
	hash uint64
}

// addPeer keeps the peer address p's "peer" group found in text, as
// "host:port" (NCCL's "host<port>" and Gloo's "[addr]:port" unwrapped),
// once per host.
func (m *Matcher) addPeer(st *state, p *cpattern, text []byte) {
	key := peerTail{p, hashBytes(text)}
	if _, ok := st.peerTails[key]; ok {
		return // read before: its peer is kept, or was refused for good
	}
	if len(st.peerTails) < maxPeerTails {
		if st.peerTails == nil {
			st.peerTails = map[peerTail]struct{}{}
		}
		st.peerTails[key] = struct{}{}
	}
	sm := p.regexp().FindSubmatchIndex(text)
	if sm == nil || sm[2*p.peerGroup] < 0 {
		return
	}
	peer := printable.String(string(text[sm[2*p.peerGroup]:sm[2*p.peerGroup+1]]))
	peer = strings.Trim(peer, "[]")
	if i := strings.IndexByte(peer, '<'); i > 0 && strings.HasSuffix(peer, ">") {
		peer = peer[:i] + ":" + peer[i+1:len(peer)-1]
	}
	peer = strings.TrimRight(peer, ":.,")
	if peer == "" || len(peer) > maxHostLen+8 {
		return
	}
	for _, q := range st.peers {
		if peerHost(q) == peerHost(peer) {
			return // one host's connections on many ports are one peer
		}
	}
	st.peers = append(st.peers, peer)
}

func (m *Matcher) addProc(st *state, set map[procID]struct{}, id procID) {
	full := len(st.procs)+len(st.tprocs) >= maxProcs || m.room.procs <= 0
	if full && st.capped {
		return // kept or not, nothing changes: no look-up (a cache miss a line past the caps)
	}
	if _, ok := set[id]; ok {
		return
	}
	if full {
		st.capped = true
		return
	}
	m.room.procs--
	set[id] = struct{}{}
}

// addHostBytes is addHost without allocating for a host already kept.
func (m *Matcher) addHostBytes(st *state, h []byte) {
	if len(h) > maxHostLen {
		h = h[:maxHostLen]
	}
	if _, ok := st.hosts[string(h)]; ok {
		return
	}
	m.addHost(st, string(h))
}

func (m *Matcher) addHost(st *state, h string) {
	if len(h) > maxHostLen {
		h = h[:maxHostLen]
	}
	if _, ok := st.hosts[h]; ok {
		return
	}
	if len(st.hosts) >= maxHosts || m.room.hosts <= 0 {
		st.hostsCapped = true
		return
	}
	m.room.hosts--
	st.hosts[h] = struct{}{}
}

func (m *Matcher) addText(st *state, text uint64, proc procID) {
	set := st.wtext[text]
	if set == nil {
		if len(st.wtext) >= maxTexts || m.room.texts <= 0 {
			st.textsLost = true // the process is counted; its echoes cannot be
			return
		}
		m.room.texts--
		set = map[procID]struct{}{}
		st.wtext[text] = set
	}
	if st.npair >= maxTextPairs || m.room.pairs <= 0 {
		// No look-up past the caps: the pair may be kept already, but
		// taking it as lost keeps count a lower bound.
		st.textsLost = true
		return
	}
	if _, ok := set[proc]; !ok {
		set[proc] = struct{}{}
		st.npair++
		m.room.pairs--
	}
}

// addBare counts a matching line that names no process by NCCL's prefix
// (proc is its Ray/vLLM process, if any): the continuation of the
// exception being read, or a new unit.
func (m *Matcher) addBare(st *state, line []byte, proc procID) {
	b := stripCollector(line)
	header := isExceptionHeader(b)
	cands := echoCands(bareText(b), m.cands[:0])
	m.cands = cands
	blk := &st.blk
	if blk.on && !header && blk.proc == proc && m.lineNo-blk.last <= maxGap && !overlaps(blk.cands, cands) {
		blk.last = m.lineNo
		if len(blk.cands)+len(cands) <= maxBlockCands {
			blk.cands = append(blk.cands, cands...)
		}
		return
	}
	*blk = block{on: true, last: m.lineNo, proc: proc, cands: append(blk.cands[:0], cands...)}
	k := utextKey{cands[0], proc}
	if u := st.utext[k]; u != nil {
		u.n++
		return
	}
	if len(st.utext) >= maxTexts || m.room.texts <= 0 {
		st.capped = true
		return
	}
	m.room.texts--
	st.utext[k] = &unit{n: 1, cands: append([]uint64(nil), cands...)}
}

func overlaps(a, b []uint64) bool {
	for _, x := range a {
		for _, y := range b {
			if x == y {
				return true
			}
		}
	}
	return false
}

// isExceptionHeader reports whether b starts like the last line of a
// Python traceback: a dotted name whose last part is a capitalised
// ...Error or ...Exception, then ':' ("RuntimeError:",
// "torch.distributed.DistBackendError:"); NCCL's own "ncclSystemError:"
// continuation is not one.
func isExceptionHeader(b []byte) bool {
	i := 0
	for i < len(b) && (isWordByte(b[i]) || b[i] == '.') {
		i++
	}
	if i == 0 || i >= len(b) || b[i] != ':' {
		return false
	}
	name := b[:i]
	if j := bytes.LastIndexByte(name, '.'); j >= 0 {
		name = name[j+1:]
	}
	return len(name) > 0 && name[0] >= 'A' && name[0] <= 'Z' &&
		(bytes.HasSuffix(name, []byte("Error")) || bytes.HasSuffix(name, []byte("Exception")))
}

func isWordByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// bareText is the message of a line without NCCL's prefix, collector
// prefixes already removed: what follows PyTorch's "Last error:" when the
// echo shares its line, without surrounding blanks.
func bareText(b []byte) []byte {
	if i := bytes.Index(b, []byte("Last error:")); i >= 0 {
		b = b[i+len("Last error:"):]
	}
	return bytes.TrimSpace(b)
}

// echoCands appends to dst the hash of text and of its ends from a word
// boundary in the first maxEchoPrefix bytes (at most maxCands in all),
// then of its starts up to a glue point (at most maxGlue): the WARN texts
// it may echo. Two ranks that write to one pipe at once glue one's text
// to the other's with no newline between (torchrun's workers:
// "... Connection refusedNCCL error in: ..."); a glue point is a
// lowercase letter or digit followed by an uppercase letter, or by one of
// the '^' and '~' with which Python 3.11 marks the code under a traceback
// line ("... Connection refused^", the other rank's marker line).
func echoCands(text []byte, dst []uint64) []uint64 {
	dst = append(dst, hashBytes(text))
	for i := 1; i < len(text) && i <= maxEchoPrefix && len(dst) < maxCands; i++ {
		if text[i-1] == ' ' && text[i] != ' ' {
			dst = append(dst, hashBytes(text[i:]))
		}
	}
	glue := 0
	for i := 1; i < len(text) && glue < maxGlue; i++ {
		if c, d := text[i-1], text[i]; (c >= 'a' && c <= 'z' || c >= '0' && c <= '9') && (d >= 'A' && d <= 'Z' || d == '^' || d == '~') {
			dst = append(dst, hashBytes(text[:i]))
			glue++
		}
	}
	return dst
}

// echoOf returns the WARN text (printed by an identified process) that a
// unit repeats.
func (st *state) echoOf(u *unit) (uint64, bool) {
	for _, c := range u.cands {
		if _, ok := st.wtext[c]; ok {
			return c, true
		}
	}
	return 0, false
}

// count is the number of processes that reported the cause. A line with
// NCCL's host:pid prefix counts its process once. A line of a traceback
// reprinted in torchrun's failure summary counts the process the summary
// names, once, and not again when its pid printed an NCCL line. A unit
// without either (an exception and its continuation lines) whose text
// repeats a text some identified process printed is PyTorch's echo of
// that WARN (after "Last error:") or the traceback the worker printed
// before torchrun reprinted it: per text, such units count only beyond
// the processes that printed it identified. Other units count alone (or
// as their Ray/vLLM process). capped reports that the count is a lower
// bound: past a cap on texts (textsLost) the units without a process of
// their own are not counted at all, since an echo of a text that was left
// out would count as a process.
func (st *state) count() (n int, capped bool) {
	n = len(st.procs)
	var pids map[int64]struct{}
	for t := range st.tprocs {
		if _, ok := st.procs[t]; ok {
			continue
		}
		if t.host == 0 {
			if pids == nil {
				pids = make(map[int64]struct{}, len(st.procs))
				for p := range st.procs {
					pids[p.pid] = struct{}{}
				}
			}
			if _, ok := pids[t.pid]; ok {
				continue
			}
		}
		n++
	}
	var echoes map[uint64]int
	var others map[procID]struct{}
	for k, u := range st.utext {
		if t, ok := st.echoOf(u); ok {
			if echoes == nil {
				echoes = map[uint64]int{}
			}
			echoes[t] += u.n
			continue
		}
		if k.proc != (procID{}) {
			if _, known := st.procs[k.proc]; !known {
				if others == nil {
					others = map[procID]struct{}{}
				}
				others[k.proc] = struct{}{}
			}
			continue
		}
		if !st.textsLost {
			n += u.n
		}
	}
	n += len(others)
	if st.textsLost {
		return n, true
	}
	for t, e := range echoes {
		if extra := e - len(st.wtext[t]); extra > 0 {
			n += extra
		}
	}
	return n, st.capped
}
