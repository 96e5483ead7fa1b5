package diagnosis

// The hang evidence in a job's output (docs/hangs.md): PyTorch's watchdog,
// process-group status, dump-signal and Gloo timeout lines of every
// version from 1.13 on, torchrun's failure summary (which rank ran on
// which host), and the last lines each rank printed. HangScan reads them
// into a HangView, one node's or one log's; JobHang (hangrule.go) merges
// the views of every node and names the rank that stopped the job.

import (
	"bytes"
	"encoding/binary"
	"strconv"
	"strings"

	"github.com/ncclrun/ncclrun/internal/lazy"
	"github.com/ncclrun/ncclrun/internal/printable"
)

// Hang is what the lines say about a collective that timed out
// (docs/contract.md "hang"): the process group, the sequence number that
// timed out (0 when the lines show none: Gloo), its op and size, the
// ranks that waited in it and those that never joined it.
type Hang struct {
	PG         string              `json:"pg"`
	Seq        int64               `json:"seq"`
	Op         string              `json:"op"`
	Numel      int64               `json:"numel,omitempty"`
	Waited     []int               `json:"waited"`
	Stalled    []StalledRank       `json:"stalled"`
	Certainty  string              `json:"certainty"`
	Evidence   []string            `json:"evidence"`
	LastLines  map[string][]string `json:"last_lines,omitempty"`
	OpMismatch []OpMismatch        `json:"op_mismatch,omitempty"`
	// EvidenceDir is the directory run's live capture wrote (RAS status,
	// flight-recorder dumps, stacks); "" when none.
	EvidenceDir string `json:"evidence_dir,omitempty"`

	// What the text needs beyond the fields: the first NCCL WARN, and
	// whether the stalled ranks are only those whose output the lines do
	// not hold.
	warn      string
	elsewhere bool
}

// StalledRank is a rank that never joined the collective, with its host
// where some line tells it.
type StalledRank struct {
	Rank int    `json:"rank"`
	Host string `json:"host,omitempty"`
}

// OpMismatch is a rank whose op or size at the sequence differs from the
// others': it called another collective.
type OpMismatch struct {
	Rank  int    `json:"rank"`
	Op    string `json:"op"`
	Numel int64  `json:"numel"`
}

// Values of Hang.Certainty.
const (
	HangCertain = "certain"
	HangLikely  = "likely"
	HangUnknown = "unknown"
)

// Kinds of HangRecord.
const (
	recTimeout = "timeout" // the rank waited in Seq until its watchdog fired
	recStatus  = "status"  // a PG-status or dump-signal line: counters only
	recGloo    = "gloo"    // a Gloo send/recv timed out (no sequence)
	recClosed  = "closed"  // a Gloo pair closed under the rank while it waited
	recLagging = "lagging" // named by a desync report or monitoredBarrier
)

// HangRecord is what one rank's lines said about one process group.
type HangRecord struct {
	Kind string `json:"kind"`
	PG   string `json:"pg,omitempty"`
	Rank int    `json:"rank"`
	Host string `json:"host,omitempty"`
	// Seq is the work that timed out; 0 when the line names none.
	Seq int64 `json:"seq,omitempty"`
	// Counted says that Enq and Comp (last enqueued, last completed) are
	// known.
	Counted bool   `json:"counted,omitempty"`
	Enq     int64  `json:"enq,omitempty"`
	Comp    int64  `json:"comp,omitempty"`
	Op      string `json:"op,omitempty"`
	Numel   int64  `json:"numel,omitempty"`
	HasSize bool   `json:"has_size,omitempty"`
	Line    string `json:"line,omitempty"`
}

// RankSpan is a run of ranks [First, End) whose output a view holds, on
// Host.
type RankSpan struct {
	First int    `json:"first"`
	End   int    `json:"end"`
	Host  string `json:"host,omitempty"`
}

// HangView is what one node's output (run) or one log (explain) said:
// the job's size where it shows, the ranks it covers, each rank's
// counters and last lines. A node's --report carries it as "hang_view".
type HangView struct {
	// Node is the host run ran on; "" for a saved log.
	Node string `json:"node,omitempty"`
	// World is the job's number of ranks, 0 unknown; PerNode the ranks a
	// node runs (CMD's --nproc_per_node), 0 unknown.
	World   int `json:"world,omitempty"`
	PerNode int `json:"per_node,omitempty"`
	// Ranks are the ranks whose output this view holds, with their host
	// (torchrun's failure summary, the node's own ranks).
	Ranks    []RankSpan          `json:"ranks,omitempty"`
	Records  []HangRecord        `json:"records,omitempty"`
	Hosts    map[string]string   `json:"hosts,omitempty"` // rank -> host, from the lines
	Seen     []int               `json:"seen,omitempty"`  // ranks that printed a line of their own
	Last     map[string][]string `json:"last_lines,omitempty"`
	Warn     string              `json:"warn,omitempty"` // the first NCCL WARN
	TimedOut bool                `json:"timed_out,omitempty"`
	// Capped says that more ranks reported than the view keeps records
	// of: a rank's silence then tells nothing.
	Capped bool `json:"capped,omitempty"`
}

// Bounds of what a HangScan keeps.
const (
	hangLastLines  = 10   // lines per rank in last_lines
	hangLineMax    = 160  // bytes of one kept line
	hangMaxRanks   = 4096 // ranks seen, with hosts
	hangMaxRings   = 512  // ranks with last lines (none for ranks that waited)
	hangMaxRecords = 2048 // records; past it, only those that name a stalled rank
	hangMaxNaming  = 1024 // records past hangMaxRecords that name a stalled rank
	hangLinedRecs  = 256  // records that keep their line
	hangEvidence   = 6    // evidence lines in a Hang
)

// HangScan reads lines for hang evidence. It sees every line (Feed,
// FeedChunk, Write); lines without one of hangLits cost a look at their
// first bytes. The zero value is not usable: NewHangScan.
type HangScan struct {
	view    HangView
	recs    map[recKey]int // index into view.Records
	last    map[int]*lineRing
	seen    map[int]bool
	waited  map[int]bool // ranks that reported waiting: their lines are not kept
	hosts   map[int]string
	sum     sumEntry
	partial []byte // Write's unfinished line
	// seenWorld is the largest communicator NCCL's lines showed.
	seenWorld int
}

type recKey struct {
	kind string
	pg   string
	rank int
}

// NewHangScan returns a scan; node is the host run runs on ("" for a
// saved log), world and perNode the job's size where CMD tells it (0
// unknown: WorldFromCommand).
func NewHangScan(node string, world, perNode int) *HangScan {
	return &HangScan{
		view:   HangView{Node: node, World: world, PerNode: perNode},
		recs:   map[recKey]int{},
		last:   map[int]*lineRing{},
		seen:   map[int]bool{},
		waited: map[int]bool{},
		hosts:  map[int]string{},
	}
}

// hangLits are the literals of the lines the scan parses; a line holding
// none of them only feeds the rings of last lines (and the first NCCL
// WARN, kept for the text, is looked for on its own).
var hangLits = [][]byte{
	[]byte("Watchdog caught"), []byte("NCCL work"), []byte("watchdog at work"),
	[]byte("dump signal"), []byte("Timed out waiting"), []byte("lagging ranks"),
	[]byte("monitoredBarrier"), []byte(summaryHost), []byte("rank      : "),
	[]byte("Connection closed by peer"), []byte("pair closure"), []byte("-------"),
	[]byte("======"), []byte("Connection reset by peer"), []byte(" nranks "),
	[]byte("srun: error: "), []byte("WORLD_SIZE="), []byte("torchrun "), []byte("torch.distributed.run "),
}

// hangAutomaton finds any of hangLits in one pass over a chunk.
var hangAutomaton = &lazy.Value[*ahoCorasick]{New: func() *ahoCorasick {
	lits := make([]string, len(hangLits))
	owners := make([]int, len(hangLits))
	for i, l := range hangLits {
		lits[i] = string(l)
	}
	return newAhoCorasick(lits, owners)
}}

// hangFilter is a gram filter (gram.go) of hangLits: for each literal the
// two grams that end it, so that wherever it starts in a line one of
// them stands at an even offset; the last ones, since a literal's start
// ("NCCL", " ") is what every NCCL line holds.
var hangFilter = &lazy.Value[*gramFilter]{New: func() *gramFilter {
	f := new(gramFilter)
	for _, l := range hangLits {
		k := len(l) - gramLen - 1 // len(l) > gramLen for every literal
		f.add(binary.LittleEndian.Uint32(l[k:]))
		f.add(binary.LittleEndian.Uint32(l[k+1:]))
	}
	return f
}}

// FeedChunk reads a chunk of whole lines (a last line without "\n" is
// read as a line).
func (s *HangScan) FeedChunk(p []byte) {
	// A line meets a gram filter of hangLits first (most lines of a
	// healthy job pass none of its probes), then the automaton, which
	// ends at its first literal; a line without one costs a look at its
	// first bytes only.
	ac, f := hangAutomaton.Get(), hangFilter.Get()
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		var line []byte
		if i < 0 {
			line, p = p, nil
		} else {
			line, p = p[:i], p[i+1:]
		}
		s.feed(line, f.mayMatch(line) && ac.has(line))
	}
}

// Feed reads one line.
func (s *HangScan) Feed(line []byte) { s.feed(line, true) }

// Write reads p as part of a stream of lines (io.Writer; never fails):
// explain tees its inputs into a scan.
func (s *HangScan) Write(p []byte) (int, error) {
	n := len(p)
	if len(s.partial) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if len(s.partial) < MaxLine {
				s.partial = append(s.partial, p[:min(len(p), MaxLine-len(s.partial))]...)
			}
			return n, nil
		}
		s.partial = append(s.partial, p[:min(i, max(0, MaxLine-len(s.partial)))]...)
		s.Feed(s.partial)
		s.partial = s.partial[:0]
		p = p[i+1:]
	}
	j := bytes.LastIndexByte(p, '\n')
	if j >= 0 {
		s.FeedChunk(p[:j+1])
		p = p[j+1:]
	}
	if len(p) > 0 {
		s.partial = append(s.partial, p[:min(len(p), MaxLine)]...)
	}
	return n, nil
}

// Flush reads the unfinished line Write holds, if any.
func (s *HangScan) Flush() {
	if len(s.partial) > 0 {
		s.Feed(s.partial)
		s.partial = s.partial[:0]
	}
}

// lineRing keeps the last hangLastLines lines of one rank, each cut to
// hangLineMax bytes, in slots that are reused: once a rank's ring has
// gone round, a line costs a copy and no allocation, and a rank that
// printed one line holds only that line.
type lineRing struct {
	buf [hangLastLines][]byte
	n   int
}

func (r *lineRing) add(b []byte) {
	k := r.n % hangLastLines
	r.buf[k] = append(r.buf[k][:0], b[:min(len(b), hangLineMax)]...)
	r.n++
}

// list is the lines kept, oldest first, as printable text.
func (r *lineRing) list() []string {
	k := min(r.n, hangLastLines)
	out := make([]string, 0, k)
	for i := r.n - k; i < r.n; i++ {
		out = append(out, printable.String(string(r.buf[i%hangLastLines])))
	}
	return out
}

// lineTags is who printed a line, as its start shows: a kubectl pod, a
// launcher's rank tag.
type lineTags struct {
	pod  string
	rank int // -1 unknown
	body []byte
}

// tagsOf reads the tags at the start of line: "[pod/NAME/CONTAINER] ",
// srun's "N: ", torchrun's "[defaultN]:", PyTorch's "[rankN]:", mpirun's
// "[job,N]<stdout>:" (in any order and repeated; PyTorch's tag wins,
// being the global rank).
func tagsOf(line []byte) lineTags {
	t := lineTags{rank: -1, body: line}
	b := line
	for k := 0; k < 4 && len(b) > 0; k++ {
		b = bytes.TrimLeft(b, " \t")
		switch {
		case bytes.HasPrefix(b, []byte("[pod/")):
			end := bytes.IndexByte(b, ']')
			if end < 0 || end > 300 {
				return t
			}
			name := b[len("[pod/"):end]
			if i := bytes.IndexByte(name, '/'); i >= 0 {
				name = name[:i]
			}
			t.pod = printable.String(string(name))
			b = b[end+1:]
		case bytes.HasPrefix(b, []byte("[rank")):
			r, rest, ok := tagNumber(b[len("[rank"):], "]:")
			if !ok {
				// A program's own "[rank3] ..." says who printed it too.
				if r, rest, ok = tagNumber(b[len("[rank"):], "] "); !ok {
					return t
				}
			}
			t.rank, b = r, rest
		case bytes.HasPrefix(b, []byte("[default")):
			r, rest, ok := tagNumber(b[len("[default"):], "]:")
			if !ok {
				return t
			}
			if t.rank < 0 {
				t.rank = r
			}
			b = rest
		case len(b) > 0 && b[0] == '[':
			// mpirun --tag-output: "[1,3]<stdout>:"
			c := bytes.IndexByte(b, ',')
			if c < 2 || c > 12 {
				return t
			}
			r, rest, ok := tagNumber(b[c+1:], "]<std")
			if !ok {
				return t
			}
			e := bytes.IndexByte(rest, ':')
			if e < 0 || e > 8 {
				return t
			}
			if t.rank < 0 {
				t.rank = r
			}
			b = rest[e+1:]
		case len(b) > 0 && '0' <= b[0] && b[0] <= '9':
			r, rest, ok := tagNumber(b, ": ")
			if !ok {
				return t
			}
			if t.rank < 0 {
				t.rank = r
			}
			b = rest
		default:
			t.body = b
			return t
		}
		t.body = b
	}
	return t
}

// tagNumber reads digits (at most 7) followed by end.
func tagNumber(b []byte, end string) (int, []byte, bool) {
	i := 0
	for i < len(b) && i < 8 && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	if i == 0 || i > 7 || !bytes.HasPrefix(b[i:], []byte(end)) {
		return 0, nil, false
	}
	n := 0
	for _, c := range b[:i] {
		n = n*10 + int(c-'0')
	}
	return n, b[i+len(end):], true
}

// The lines, by version (docs/hangs.md has the table and the sources),
// compiled on first use: a run whose CMD prints nothing never pays for
// them.
var (
	// The watchdog's timeout, every version: 2.0 and earlier have no Numel.
	watchdogRe = &lazy.Regexp{Expr: `Watchdog caught collective operation timeout: WorkNCCL\(SeqNum=(\d+),\s*OpType=(\w+)(?:,\s*NumelIn=(-?\d+),\s*NumelOut=(-?\d+))?`}
	// The PG status: 2.3 nightlies ("Exception hit in NCCL work: S"),
	// 2.4-2.5 ("... detected by watchdog at work: S, last enqueued NCCL
	// work: E, last completed NCCL work: C." and "Timeout at NCCL work:
	// S, ..."), 2.6+ ("failure detected by watchdog at work sequence id:
	// S PG status: last enqueued work: E, last completed work: C"), a dev
	// branch ("Work timeout is detected by watchdog at work: S").
	statusSeqRe = &lazy.Regexp{Expr: `(?:Exception hit in NCCL work|detected by watchdog at work(?: sequence id)?|Timeout at NCCL work):\s*(\d+)`}
	countersRe  = &lazy.Regexp{Expr: `[Ll]ast enqueued (?:NCCL )?work:\s*(-?\d+),\s*last completed (?:NCCL )?work:\s*(-?\d+)`}
	// The dump signal (2.3+): the counters are the monitor's PG's.
	dumpRe = &lazy.Regexp{Expr: `Received a dump signal due to a collective timeout from\s+(?:rank\s+(\d+)|this local rank)`}
	// The PG prefix: "[PG 0 Rank 1]", "[PG 0 (default_pg) Rank 1]", "[PG
	// ID 2 PG GUID 3 Rank 3]", "[PG ID 0 PG GUID 0(default_pg) Rank 7]",
	// "[PG GUID 3 Rank 1]".
	pgRe = &lazy.Regexp{Expr: `\[PG (?:ID \d+ PG GUID |GUID )?(\d+)\s*(\([^)]*\))?\s*Rank (\d+)\]`}
	// "[Rank N]" in the message: the rank within the work's PG.
	workRankRe = &lazy.Regexp{Expr: `\[Rank (\d+)\]`}
	// Gloo: "Timed out waiting 1800000ms for recv operation to complete".
	glooRe = &lazy.Regexp{Expr: `Timed out waiting \d+ ?ms for (?:send|recv) operation to complete`}
	// Gloo pairs closed after another rank's timeout.
	glooClosedRe = &lazy.Regexp{Expr: `Connection closed by peer|Connection reset by peer|Application timeout caused pair closure`}
	// Desync debug and monitored_barrier name the ranks themselves.
	laggingRe = &lazy.Regexp{Expr: `ranks? \[([\d,\s]+)\] (?:are|is) the lagging ranks?`}
	barrierRe = &lazy.Regexp{Expr: `Ranks? ([\d,\s]+?) failed to pass monitoredBarrier`}
	// srun's end of a task: "HOST: tasks 0-3,5: Aborted", "HOST: task 12: Terminated".
	srunTasksRe = &lazy.Regexp{Expr: `^([\w.-]+): tasks? ([\d,\-]+):`}
	// An environment dump's job size.
	worldSizeRe = &lazy.Regexp{Expr: `\bWORLD_SIZE=(\d+)\b`}
	// The summary's rank field: "rank      : 1 (local_rank: 1)".
	sumRankRe = &lazy.Regexp{Expr: `^rank\s+: (\d+) \(local_rank: (\d+)\)`}
)

// feed reads one line; full says the line may carry one of hangLits.
func (s *HangScan) feed(line []byte, full bool) {
	line = trimEOL(line)
	if len(line) == 0 {
		return
	}
	t := tagsOf(line)
	if t.rank >= 0 && t.rank < 1<<24 {
		s.sawRank(t.rank, t.pod)
		if r := s.ring(t.rank); r != nil {
			r.add(t.body)
		}
	}
	if s.view.Warn == "" && bytes.Contains(t.body, []byte("NCCL WARN")) && !ownLine(line) {
		s.view.Warn = keptLine(t.body) // the first WARN; a WARN line says nothing else here
	}
	if !full || ownLine(line) {
		return // ncclrun's own lines (an inner ncclrun's) quote, they do not report
	}
	s.summaryLine(t.body, t.pod)
	body := t.body
	s.sizeHints(body)
	if !bytes.Contains(body, []byte("NCCL")) && !bytes.Contains(body, []byte("Timed out")) &&
		!bytes.Contains(body, []byte("watchdog")) && !bytes.Contains(body, []byte("Watchdog")) &&
		!bytes.Contains(body, []byte("lagging")) && !bytes.Contains(body, []byte("monitoredBarrier")) &&
		!bytes.Contains(body, []byte("Connection")) && !bytes.Contains(body, []byte("dump signal")) {
		return
	}
	host := t.pod
	if f, ok := scanPrefixAt0(body); ok {
		host = string(body[f.hostStart:f.hostEnd]) // NCCL's "host:pid:tid [dev]"
	} else if len(body) > 0 && body[0] == '(' {
		if pl := ParseLine(body); pl.Host != "" {
			host = pl.Host // Ray's "(Worker pid=N, ip=A)"
		}
	}
	if n := nranksOf(body); n > s.seenWorld && n < 1<<24 {
		s.seenWorld = n
	}
	if s.view.Capped && !bytes.Contains(body, []byte("dump signal")) && !bytes.Contains(body, []byte("lagging")) && !bytes.Contains(body, []byte("monitoredBarrier")) {
		return // past the records kept, only the lines that name a stalled rank count
	}
	rank := t.rank
	pg, pgRank := "", -1
	if m := match(pgRe, "[PG ", body); m != nil {
		pg = string(m[1]) + string(m[2])
		pgRank, _ = strconv.Atoi(string(m[3]))
	}
	if rank < 0 && pgRank >= 0 && isDefaultPG(pg) {
		rank = pgRank
	}
	if m := match(watchdogRe, "Watchdog caught", body); m != nil {
		if rank < 0 {
			if w := workRankRe.Get().FindSubmatch(body); w != nil {
				rank, _ = strconv.Atoi(string(w[1]))
			}
		}
		s.view.TimedOut = true
		if rank < 0 {
			return
		}
		seq, _ := strconv.ParseInt(string(m[1]), 10, 64)
		r := HangRecord{Kind: recTimeout, PG: pg, Rank: rank, Host: host, Seq: seq, Op: string(m[2]), Line: keptLine(body)}
		if m[3] != nil {
			r.Numel, _ = strconv.ParseInt(string(m[3]), 10, 64)
			r.HasSize = true
		}
		s.record(r)
		return
	}
	if m := match(statusSeqRe, "work", body); m != nil {
		s.view.TimedOut = true
		if rank < 0 {
			return
		}
		seq, _ := strconv.ParseInt(string(m[1]), 10, 64)
		r := HangRecord{Kind: recTimeout, PG: pg, Rank: rank, Host: host, Seq: seq, Line: keptLine(body)}
		s.record(r.withCounters(body))
		return
	}
	if bytes.Contains(body, []byte("dump signal")) && dumpRe.Get().Match(body) {
		s.view.TimedOut = true
		if rank < 0 {
			return
		}
		r := HangRecord{Kind: recStatus, PG: pg, Rank: rank, Host: host, Line: keptLine(body)}
		s.record(r.withCounters(body))
		return
	}
	if bytes.Contains(body, []byte("Timed out waiting")) && glooRe.Get().Match(body) {
		s.view.TimedOut = true
		if s.sum.on {
			s.sum.timedOut, s.sum.line = true, keptLine(body)
		}
		if rank >= 0 {
			s.record(HangRecord{Kind: recGloo, Rank: rank, Host: host, Line: keptLine(body)})
		}
		return
	}
	if (bytes.Contains(body, []byte("Connection")) || bytes.Contains(body, []byte("pair closure"))) && glooClosedRe.Get().Match(body) {
		if s.sum.on {
			s.sum.closed, s.sum.line = true, keptLine(body)
		}
		if rank >= 0 {
			s.record(HangRecord{Kind: recClosed, Rank: rank, Host: host, Line: keptLine(body)})
		}
		return
	}
	if m := match(laggingRe, "lagging", body); m != nil {
		s.lagging(m[1], body)
		return
	}
	if m := match(barrierRe, "monitoredBarrier", body); m != nil {
		s.view.TimedOut = true
		s.lagging(m[1], body)
	}
}

// sizeHints reads what a log may tell of the job's size and hosts
// besides PyTorch's lines: srun's "srun: error: HOST: tasks 0-3,5: ..."
// (tasks are ranks under srun), an environment dump's WORLD_SIZE=N, and a
// launcher's command line echoed by a script ("$ torchrun --nnodes 2
// --nproc_per_node 8 ...").
func (s *HangScan) sizeHints(body []byte) {
	if rest, ok := bytes.CutPrefix(body, []byte("srun: error: ")); ok {
		if m := srunTasksRe.Get().FindSubmatch(rest); m != nil {
			host := printable.String(string(m[1]))
			for _, r := range parseRanks(m[2]) {
				s.sawRank(r, host)
			}
		}
		return
	}
	if m := match(worldSizeRe, "WORLD_SIZE=", body); m != nil {
		if n, err := strconv.Atoi(string(m[1])); err == nil && n > s.seenWorld && n < 1<<24 {
			s.seenWorld = n
		}
	}
	if s.view.World == 0 && (bytes.Contains(body, []byte("torchrun ")) || bytes.Contains(body, []byte("torch.distributed.run "))) && len(body) < 4096 {
		if w, per := WorldFromCommand(strings.Fields(string(body))); w > 0 || per > 0 {
			s.seenWorld = max(s.seenWorld, w)
			if s.view.PerNode == 0 {
				s.view.PerNode = per
			}
		}
	}
}

// parseRanks reads "0-3,5,7-8" (at most 4096 ranks).
func parseRanks(b []byte) []int {
	var out []int
	for _, f := range strings.Split(string(b), ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(f), "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			continue
		}
		z := a
		if isRange {
			if z, err = strconv.Atoi(hi); err != nil {
				continue
			}
		}
		for r := a; r <= z && len(out) < 4096; r++ {
			out = append(out, r)
		}
	}
	return out
}

// match is re's submatches in body, looked for only where body holds lit
// (most lines do not: a substring search is cheaper than the expression).
// withCounters is r with the PG status's last enqueued and completed
// work of body, when it names them.
func (r HangRecord) withCounters(body []byte) HangRecord {
	if c := countersRe.Get().FindSubmatch(body); c != nil {
		r.Counted = true
		r.Enq, _ = strconv.ParseInt(string(c[1]), 10, 64)
		r.Comp, _ = strconv.ParseInt(string(c[2]), 10, 64)
	}
	return r
}

// nranksOf is N of an NCCL INFO line's "rank R nranks N" ("comm 0x...
// rank 1 nranks 8 cudaDev 1": its communicator's size; the largest is the
// default PG's, the job's size), -1 when it has none. Every rank prints it at
// init, and a healthy INFO log holds it by the hundred thousand: read by
// hand, where an expression would scan the line from each "NCCL INFO".
func nranksOf(body []byte) int {
	const rank, nranks = "rank ", " nranks "
	i := bytes.Index(body, []byte(nranks))
	if i < 0 {
		return -1
	}
	j := i
	for j > 0 && isDigit(body[j-1]) {
		j--
	}
	k := j - len(rank)
	if j == i || k < 0 || string(body[k:j]) != rank || k > 0 && isWordByte(body[k-1]) ||
		!bytes.Contains(body[:k], []byte("NCCL INFO ")) {
		return -1
	}
	n, end, ok := digits(body, i+len(nranks), 9)
	if !ok || end < len(body) && isWordByte(body[end]) {
		return -1
	}
	return n
}

func match(re *lazy.Regexp, lit string, body []byte) [][]byte {
	if !bytes.Contains(body, []byte(lit)) {
		return nil
	}
	return re.Get().FindSubmatch(body)
}

// lagging records the ranks a desync report or monitored_barrier named.
func (s *HangScan) lagging(list, line []byte) {
	s.view.TimedOut = true
	for _, f := range strings.FieldsFunc(string(list), func(r rune) bool { return r == ',' || r == ' ' }) {
		if r, err := strconv.Atoi(f); err == nil && r >= 0 && r < 1<<24 {
			s.record(HangRecord{Kind: recLagging, Rank: r, Line: keptLine(line)})
		}
	}
}

// isDefaultPG reports whether a PG key is the default PG's (PG 0), whose
// PG-local ranks are the global ranks.
func isDefaultPG(pg string) bool { return pg == "0" || strings.HasPrefix(pg, "0(") }

// keptLine is a line as the scan keeps it: bounded and printable.
func keptLine(b []byte) string {
	if len(b) > 2*hangLineMax {
		b = b[:2*hangLineMax]
	}
	b = bytes.TrimSpace(b)
	if len(b) > hangLineMax {
		b = b[:hangLineMax]
	}
	return printable.String(string(b))
}

func (s *HangScan) ring(rank int) *lineRing {
	r := s.last[rank]
	if r == nil {
		if s.waited[rank] {
			return nil
		}
		if len(s.last) >= hangMaxRings {
			return nil
		}
		r = new(lineRing)
		s.last[rank] = r
	}
	return r
}

func (s *HangScan) sawRank(rank int, host string) {
	if !s.seen[rank] && len(s.seen) < hangMaxRanks {
		s.seen[rank] = true
	}
	if host != "" && s.hosts[rank] != host && len(s.hosts) < hangMaxRanks {
		s.hosts[rank] = host
	}
}

// record keeps r: the first of its kind for a rank and PG, or a later one
// that adds what the first lacked (a timeout's PG-status line after its
// watchdog line).
func (s *HangScan) record(r HangRecord) {
	if r.Host != "" {
		s.sawRank(r.Rank, r.Host)
	}
	if r.Kind == recTimeout || r.Kind == recGloo || r.Kind == recClosed {
		delete(s.last, r.Rank) // it waited: only a stalled rank's lines are shown
		if len(s.waited) < hangMaxRanks {
			s.waited[r.Rank] = true
		}
	}
	k := recKey{r.Kind, r.PG, r.Rank}
	if i, ok := s.recs[k]; ok {
		old := &s.view.Records[i]
		if !old.Counted && r.Counted {
			old.Counted, old.Enq, old.Comp = true, r.Enq, r.Comp
		}
		return
	}
	if n := len(s.view.Records); n >= hangMaxRecords {
		s.view.Capped = true
		naming := r.Kind == recStatus || r.Kind == recLagging
		if !naming || n >= hangMaxRecords+hangMaxNaming {
			return
		}
	}
	if len(s.view.Records) >= hangLinedRecs && r.Kind != recStatus && r.Kind != recLagging {
		r.Line = ""
	}
	s.recs[k] = len(s.view.Records)
	s.view.Records = append(s.view.Records, r)
}

// sumEntry is the torchrun failure-summary entry being read: its host,
// rank and local rank, and whether its traceback ends in a Gloo timeout
// or a closed pair.
type sumEntry struct {
	on               bool
	host             string
	rank, local      int
	timedOut, closed bool
	line             string // the traceback's Gloo line
}

// summaryLine follows torchrun's failure summary (torchrun.go has its
// layout): each entry tells a rank's host and local rank, so the node's
// ranks, and its traceback whether the rank timed out.
func (s *HangScan) summaryLine(body []byte, pod string) {
	b := bytes.TrimLeft(body, " \t")
	switch {
	case bytes.HasPrefix(b, []byte(summaryHost)):
		s.endSummary()
		h := string(bytes.TrimSpace(b[len(summaryHost):]))
		if i := strings.IndexByte(h, '.'); i > 0 {
			h = h[:i]
		}
		if h == "" || h == "localhost" {
			h = pod
		}
		s.sum = sumEntry{on: true, host: printable.String(h), rank: -1, local: -1}
	case s.sum.on && bytes.HasPrefix(b, []byte("rank      : ")):
		if m := sumRankRe.Get().FindSubmatch(b); m != nil {
			s.sum.rank, _ = strconv.Atoi(string(m[1]))
			s.sum.local, _ = strconv.Atoi(string(m[2]))
		}
	case s.sum.on && (bytes.HasPrefix(b, []byte("-------")) || bytes.HasPrefix(b, []byte("======"))):
		s.endSummary()
	}
}

// endSummary ends the entry being read: its rank's host, the node's span
// and the rank's verdict.
func (s *HangScan) endSummary() {
	e := s.sum
	s.sum = sumEntry{}
	if !e.on || e.rank < 0 || e.rank >= 1<<24 {
		return
	}
	if e.host != "" {
		s.hosts[e.rank] = e.host
	}
	if e.local >= 0 && e.local <= e.rank {
		s.addSpan(e.rank-e.local, e.host)
	}
	switch {
	case e.timedOut:
		s.record(HangRecord{Kind: recGloo, Rank: e.rank, Host: e.host, Line: e.line})
	case e.closed:
		s.record(HangRecord{Kind: recClosed, Rank: e.rank, Host: e.host, Line: e.line})
	}
}

// addSpan notes that the ranks from first on (as many as a node runs)
// are host's; End is filled in by View.
func (s *HangScan) addSpan(first int, host string) {
	for _, sp := range s.view.Ranks {
		if sp.First == first {
			return
		}
	}
	if len(s.view.Ranks) < hangMaxRanks {
		s.view.Ranks = append(s.view.Ranks, RankSpan{First: first, Host: host})
	}
}

// View returns what the scan found so far (a copy).
func (s *HangScan) View() HangView {
	s.endSummaryIfDone()
	v := s.view
	if v.World == 0 {
		v.World = s.seenWorld
	}
	v.Records = append([]HangRecord(nil), s.view.Records...)
	v.Ranks = append([]RankSpan(nil), s.view.Ranks...)
	for i := range v.Ranks {
		if v.PerNode > 0 {
			v.Ranks[i].End = v.Ranks[i].First + v.PerNode
		}
		if v.Ranks[i].Host == "" {
			v.Ranks[i].Host = v.Node
		}
	}
	if len(s.hosts) > 0 {
		v.Hosts = make(map[string]string, len(s.hosts))
		for r, h := range s.hosts {
			v.Hosts[strconv.Itoa(r)] = h
		}
	}
	for r := range s.seen {
		v.Seen = append(v.Seen, r)
	}
	sortInts(v.Seen)
	if len(s.last) > 0 {
		v.Last = make(map[string][]string, len(s.last))
		for r, ring := range s.last {
			v.Last[strconv.Itoa(r)] = ring.list()
		}
	}
	return v
}

// endSummaryIfDone closes a summary entry the input ended in.
func (s *HangScan) endSummaryIfDone() {
	if s.sum.on && s.sum.rank >= 0 {
		s.endSummary()
	}
}

// Hang is the verdict of this view alone (JobHang of it); nil when no
// collective timed out.
func (s *HangScan) Hang() *Hang { return JobHang([]HangView{s.View()}) }

// Trim drops what a merge of many views does not need, so that explain
// over a thousand nodes holds little: the last lines of ranks this view
// saw time out (they waited; only a stalled rank's last lines are
// shown), and with keepLines false the records' lines (the evidence
// quotes a few).
func (v *HangView) Trim(keepLines bool) {
	waited := map[int]bool{}
	for i := range v.Records {
		r := &v.Records[i]
		if r.Kind == recTimeout || r.Kind == recGloo || r.Kind == recClosed {
			waited[r.Rank] = true
		}
		if !keepLines {
			r.Line = ""
		}
	}
	for k := range v.Last {
		if n, err := strconv.Atoi(k); err == nil && waited[n] {
			delete(v.Last, k)
		}
	}
}
