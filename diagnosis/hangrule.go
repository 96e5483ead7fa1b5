package diagnosis

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// JobHang merges the views of a job's nodes or logs and applies the rule
// of docs/hangs.md to the process group most ranks timed out in: S is the
// sequence most of them timed out at; a rank waited in S if it timed out
// there or enqueued S; a rank whose counters show it never enqueued S (E
// < S) is stalled for certain; a rank whose output the views hold but
// that said nothing of S is stalled, likely, when the job's size is
// known; a rank whose output no view holds is named as elsewhere, of
// unknown certainty. It returns nil when no collective timed out.
func JobHang(views []HangView) *Hang {
	timedOut := false
	for _, v := range views {
		timedOut = timedOut || v.TimedOut
	}
	if !timedOut {
		return nil
	}
	j := mergeViews(views)
	return j.verdict()
}

// job is the merged views.
type job struct {
	world    int
	perNode  int
	spans    []RankSpan
	recs     []HangRecord
	hosts    map[int]string
	seen     map[int]bool
	last     map[int][]string
	warn     string
	partial  bool // a node's own view (run): it holds only its ranks
	hasSpans bool
	capped   bool // a view kept only some ranks' records
	// hostRanks are the ranks with a host, sorted (hostOf).
	hostRanks []int
}

func mergeViews(views []HangView) *job {
	j := &job{hosts: map[int]string{}, seen: map[int]bool{}, last: map[int][]string{}}
	dup := map[recKey]bool{}
	for _, v := range views {
		j.world = max(j.world, v.World)
		j.perNode = max(j.perNode, v.PerNode)
		if v.Node != "" {
			j.partial = true
		}
		j.capped = j.capped || v.Capped
		if j.warn == "" {
			j.warn = v.Warn
		}
		j.spans = append(j.spans, v.Ranks...)
		for r, h := range v.Hosts {
			if n, err := strconv.Atoi(r); err == nil && h != "" {
				j.hosts[n] = h
			}
		}
		for _, r := range v.Seen {
			j.seen[r] = true
		}
		for r, ls := range v.Last {
			if n, err := strconv.Atoi(r); err == nil && len(ls) > 0 {
				j.last[n] = ls
			}
		}
		for _, r := range v.Records {
			k := recKey{r.Kind, r.PG, r.Rank}
			if dup[k] {
				continue
			}
			dup[k] = true
			j.recs = append(j.recs, r)
			if r.Host != "" {
				j.hosts[r.Rank] = r.Host
			}
		}
	}
	j.hasSpans = len(j.spans) > 0
	if j.world == 0 && len(j.spans) == 1 && j.perNode == 0 {
		// One node's summary without the job's size: the node holds the
		// ranks from its first on, as far as any line names one.
		j.spans[0].End = max(j.spans[0].End, j.members())
	}
	j.fillSpans()
	for _, sp := range j.spans {
		for r := sp.First; r < sp.End && r-sp.First < hangMaxRanks; r++ {
			if _, ok := j.hosts[r]; !ok && sp.Host != "" {
				j.hosts[r] = sp.Host
			}
		}
	}
	j.joinPGs()
	return j
}

// fillSpans ends each span of ranks without an end: at the next span's
// first rank, the last one at the job's size, or as long as the others.
func (j *job) fillSpans() {
	sort.Slice(j.spans, func(a, b int) bool { return j.spans[a].First < j.spans[b].First })
	out := j.spans[:0]
	for _, sp := range j.spans {
		if len(out) > 0 && out[len(out)-1].First == sp.First {
			continue
		}
		out = append(out, sp)
	}
	j.spans = out
	size := j.perNode
	for i := range j.spans {
		if j.spans[i].End > j.spans[i].First {
			continue
		}
		switch {
		case size > 0:
			j.spans[i].End = j.spans[i].First + size
		case i+1 < len(j.spans):
			j.spans[i].End = j.spans[i+1].First
			size = j.spans[i].End - j.spans[i].First
		case i > 0:
			j.spans[i].End = j.spans[i].First + (j.spans[i-1].End - j.spans[i-1].First)
		case j.world > 0:
			j.spans[i].End = j.world
		default:
			j.spans[i].End = j.spans[i].First + 1
		}
	}
}

// joinPGs gives a watchdog line without a PG (every version but the
// newest prints none) the PG of the same rank's status line at the same
// sequence, and its op and size to that line's record.
func (j *job) joinPGs() {
	type rs struct {
		rank int
		seq  int64
	}
	withPG := map[rs]int{}
	for i, r := range j.recs {
		if r.Kind == recTimeout && r.PG != "" {
			withPG[rs{r.Rank, r.Seq}] = i
		}
	}
	out := j.recs[:0]
	for _, r := range j.recs {
		if r.Kind == recTimeout && r.PG == "" {
			if i, ok := withPG[rs{r.Rank, r.Seq}]; ok {
				p := &j.recs[i]
				if p.Op == "" {
					p.Op, p.Numel, p.HasSize = r.Op, r.Numel, r.HasSize
				}
				p.Line = r.Line + "\n" + p.Line
				continue
			}
		}
		out = append(out, r)
	}
	j.recs = out
}

// members is the job's ranks: its size where known, else up to the
// highest rank any line or span names.
func (j *job) members() int {
	n := j.world
	for _, r := range j.recs {
		n = max(n, r.Rank+1)
	}
	for _, sp := range j.spans {
		n = max(n, sp.End)
	}
	for r := range j.seen {
		n = max(n, r+1)
	}
	return min(n, 1<<20)
}

// covered reports whether the views hold rank r's output: a span of a
// node whose output they hold, a line of its own, or, when no view is a
// node's own and none tells spans, every rank (a log of the whole job).
func (j *job) covered(r int) bool {
	if j.seen[r] {
		return true
	}
	// spans are sorted by First and do not start twice (fillSpans).
	i := sort.Search(len(j.spans), func(k int) bool { return j.spans[k].First > r }) - 1
	if i >= 0 && r < j.spans[i].End {
		return true
	}
	return !j.partial && !j.hasSpans
}

func (j *job) verdict() *Hang {
	h := &Hang{Waited: []int{}, Stalled: []StalledRank{}, Evidence: []string{}}
	pg := j.wavefront()
	h.PG = pg
	var seqs []int64
	for _, r := range j.recs {
		if r.Kind == recTimeout && r.PG == pg {
			seqs = append(seqs, r.Seq)
		}
	}
	h.Seq = mode(seqs)
	waited := map[int]bool{}
	behind := map[int]HangRecord{}
	lagging := map[int]HangRecord{}
	var evid []string
	addEv := func(l string) {
		if l == "" || len(evid) >= hangEvidence {
			return
		}
		for _, e := range evid {
			if e == l {
				return
			}
		}
		evid = append(evid, l)
	}
	type opKey struct {
		op    string
		numel int64
		sized bool
	}
	ops := map[int]opKey{}
	for _, r := range j.recs {
		switch r.Kind {
		case recLagging:
			lagging[r.Rank] = r
			continue
		case recGloo, recClosed:
			if h.Seq == 0 || pg == "" {
				waited[r.Rank] = true
			}
			continue
		}
		if r.PG != pg {
			continue
		}
		switch {
		case r.Kind == recTimeout && r.Seq == h.Seq,
			r.Counted && r.Enq >= h.Seq:
			waited[r.Rank] = true
			if r.Kind == recTimeout && r.Seq == h.Seq && r.Op != "" {
				ops[r.Rank] = opKey{r.Op, r.Numel, r.HasSize}
			}
		case r.Counted && r.Enq < h.Seq:
			behind[r.Rank] = r
		}
	}
	// The op and size most waiting ranks were in; the others called
	// another collective.
	count := map[opKey]int{}
	for _, k := range ops {
		count[k]++
	}
	var best opKey
	for k, n := range count {
		if n > count[best] || n == count[best] && (k.op < best.op || k.op == best.op && k.numel < best.numel) {
			best = k
		}
	}
	h.Op, h.Numel = best.op, best.numel
	if h.Op == "" && h.Seq == 0 {
		h.Op = "unknown"
	}
	if len(count) > 1 {
		for _, r := range sortedKeys(ops) {
			k := ops[r]
			if k.op != best.op || k.sized && best.sized && k.numel != best.numel {
				h.OpMismatch = append(h.OpMismatch, OpMismatch{Rank: r, Op: k.op, Numel: k.numel})
			}
		}
	}
	for r := range behind {
		delete(waited, r)
	}
	for r := range lagging {
		delete(waited, r)
	}
	h.Waited = sortedKeys(waited)
	if len(h.Waited) == 0 {
		h.Waited = []int{}
	}
	// Who never joined.
	certain := len(behind) > 0 || len(lagging) > 0
	stalled := map[int]bool{}
	for r := range behind {
		stalled[r] = true
	}
	for r := range lagging {
		stalled[r] = true
	}
	var elsewhere []int
	moreStalled, moreElsewhere := 0, 0
	guessed := 0 // stalled ranks with no line, in a log that does not give the job's size
	n := j.members()
	j.hostRanks = sortedKeys(j.hosts)
	// Silence says something only where the group's members are known:
	// the default group's are the job's ranks; a sub-group's are not in
	// the lines.
	if len(waited) > 0 && len(lagging) == 0 && !j.capped && (pg == "" || isDefaultPG(pg)) {
		// Bounded: the first hangMaxStalled of each kind are kept, the
		// others counted.
		for r := 0; r < n; r++ {
			switch {
			case waited[r] || stalled[r]:
			case j.covered(r):
				if !j.seen[r] && j.world == 0 && !j.hasSpans {
					guessed++ // only the largest rank seen says this rank exists
				}
				if len(stalled) < hangMaxStalled {
					stalled[r] = true
				} else {
					moreStalled++
				}
			case len(elsewhere) < hangMaxStalled:
				elsewhere = append(elsewhere, r)
			default:
				moreElsewhere++
			}
		}
	}
	for _, r := range sortedKeys(stalled) {
		if len(h.Stalled) == hangMaxStalled {
			moreStalled += len(stalled) - hangMaxStalled
			break
		}
		h.Stalled = append(h.Stalled, StalledRank{Rank: r, Host: j.hostOf(r)})
	}
	if moreStalled > 0 {
		addEv(fmt.Sprintf("and %d more ranks that never joined (the first %d are listed)", moreStalled, hangMaxStalled))
	}
	switch {
	case certain:
		h.Certainty = HangCertain
	case len(stalled) > 0 && guessed == len(stalled)+moreStalled:
		// Every rank named printed nothing at all, and the log does not
		// say how many ranks there are: a log that holds only some ranks'
		// output (one rank's lines pasted) reads the same as a silent
		// straggler, so the silence names nobody for sure.
		h.Certainty = HangUnknown
		addEv(fmt.Sprintf("ranks %s printed nothing in this input, which does not give the job's size: they never joined, or their output is elsewhere", rankList(sortedKeys(stalled))))
	case len(stalled) > 0:
		h.Certainty = HangLikely
	case len(elsewhere) > 0:
		for _, r := range elsewhere[:min(len(elsewhere), hangMaxStalled)] {
			h.Stalled = append(h.Stalled, StalledRank{Rank: r, Host: j.hosts[r]})
		}
		h.Certainty = HangUnknown
		more := ""
		if moreElsewhere > 0 {
			more = fmt.Sprintf(" and %d more", moreElsewhere)
		}
		addEv(fmt.Sprintf("ranks %s%s ran on other nodes: their output is not in this log", rankList(elsewhere), more))
	case len(waited) > 0 && n > 0 && len(waited) >= n && (j.world > 0 || !j.hasSpans && !j.partial):
		// Every rank joined: the job's size is known, or the input is
		// the whole job's output.
		h.Certainty = HangLikely
		if j.recsCounted(pg) {
			h.Certainty = HangCertain
		}
	default:
		h.Certainty = HangUnknown
	}
	if j.capped {
		addEv(fmt.Sprintf("more than %d ranks reported: ncclrun keeps that many records, so a rank's silence is not judged", hangMaxRecords))
	}
	// Evidence: the lines that decided it, the stalled ranks' first.
	for _, r := range sortedKeys(behind) {
		addEv(behind[r].Line)
	}
	for _, r := range sortedKeys(lagging) {
		addEv(lagging[r].Line)
	}
	for _, m := range h.OpMismatch {
		for _, r := range j.recs {
			if r.Rank == m.Rank && r.Kind == recTimeout && r.PG == pg {
				addEv(firstOf(r.Line))
			}
		}
	}
	for _, r := range j.recs {
		if waited[r.Rank] && (r.Kind == recTimeout || r.Kind == recGloo) && (r.PG == pg || r.Kind == recGloo) {
			addEv(firstOf(r.Line))
		}
	}
	if len(h.Stalled) == 0 && j.warn != "" {
		addEv(j.warn)
	}
	h.Evidence = append(h.Evidence, evid...)
	for _, s := range h.Stalled {
		if ls := j.last[s.Rank]; len(ls) > 0 {
			if h.LastLines == nil {
				h.LastLines = map[string][]string{}
			}
			h.LastLines[strconv.Itoa(s.Rank)] = ls
		}
	}
	h.warn = j.warn
	h.elsewhere = h.Certainty == HangUnknown && len(elsewhere) > 0
	return h
}

// hostOf is rank r's host: as a line or span tells it, else the host of
// the ranks on both sides of it when they share one (launchers place
// consecutive ranks on a node: torchrun always, srun and mpirun by
// default), else "".
func (j *job) hostOf(r int) string {
	if h := j.hosts[r]; h != "" {
		return h
	}
	i := sort.SearchInts(j.hostRanks, r)
	if i == 0 || i >= len(j.hostRanks) {
		return ""
	}
	below, above := j.hostRanks[i-1], j.hostRanks[i]
	if j.hosts[below] == j.hosts[above] {
		return j.hosts[below]
	}
	return ""
}

// recsCounted reports whether every timeout record of pg has counters.
func (j *job) recsCounted(pg string) bool {
	any := false
	for _, r := range j.recs {
		if r.Kind == recTimeout && r.PG == pg {
			if !r.Counted {
				return false
			}
			any = true
		}
	}
	return any
}

// wavefront is the process group most ranks timed out in ("" when the
// lines name none: 1.13-2.1, Gloo).
func (j *job) wavefront() string {
	ranks := map[string]map[int]bool{}
	for _, r := range j.recs {
		if r.Kind != recTimeout {
			continue
		}
		if ranks[r.PG] == nil {
			ranks[r.PG] = map[int]bool{}
		}
		ranks[r.PG][r.Rank] = true
	}
	best, bn := "", -1
	for pg, rs := range ranks {
		if len(rs) > bn || len(rs) == bn && pg < best {
			best, bn = pg, len(rs)
		}
	}
	return best
}

func firstOf(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// hangMaxStalled is the most stalled ranks a Hang lists.
const hangMaxStalled = 256

// mode is the most common value (the smallest of equals); 0 for none.
func mode(v []int64) int64 {
	c := map[int64]int{}
	var best int64
	for _, x := range v {
		c[x]++
		if c[x] > c[best] || c[x] == c[best] && x < best {
			best = x
		}
	}
	return best
}

func sortedKeys[V any](m map[int]V) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sortInts(out)
	return out
}

func sortInts(v []int) { sort.Ints(v) }

// rankList writes ranks as "0, 2-5, 9" (runs collapsed), at most 32
// runs.
func rankList(rs []int) string {
	var parts []string
	for i := 0; i < len(rs); {
		k := i
		for k+1 < len(rs) && rs[k+1] == rs[k]+1 {
			k++
		}
		if len(parts) == 32 {
			parts = append(parts, "...")
			break
		}
		if k > i {
			parts = append(parts, fmt.Sprintf("%d-%d", rs[i], rs[k]))
		} else {
			parts = append(parts, strconv.Itoa(rs[i]))
		}
		i = k + 1
	}
	return strings.Join(parts, ", ")
}
