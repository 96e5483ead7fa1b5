package diagnosis

import (
	"bytes"
	"strconv"
	"strings"
)

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
