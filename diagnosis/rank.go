package diagnosis

import (
	"sort"
)

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
	if s.repeat {
		return false
	}
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

// failureKnown reports whether an active non-generic cause of priority
// hiddenBy or more exists (it hides a generic entry with that HiddenBy).
func (m *Matcher) failureKnown(hiddenBy int) bool {
	if hiddenBy <= 0 {
		return false
	}
	for _, st := range m.order {
		if !st.ce.Generic && m.isActive(st) && m.priority(st) >= hiddenBy {
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
	harmlessOnly := true // every cause is seen through benign lines only
	for _, st := range m.order {
		if m.isActive(st) && !m.benignOnly(st) {
			harmlessOnly = false
		}
	}
	for _, st := range m.order {
		if !m.isActive(st) || (st.ce.Generic && m.failureKnown(st.ce.HiddenBy)) {
			continue
		}
		if !harmlessOnly && m.benignOnly(st) && !m.explainsOther(st) {
			continue // a line healthy jobs print never sits beside a real cause
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
	// A program's exception seen before the top cause, when that cause is
	// only a consequence (a lost peer, a timeout, the generic error), is
	// the first failure (exception.go).
	top := rs[0].st.ce
	excFirst := m.exc != nil && (top.KnockOn || top.Generic) && m.exc.seq < rs[0].seq
	keep := out[:0]
	for i, r := range rs {
		d := m.snapshot(r.st)
		ce := r.st.ce
		switch {
		case excFirst && ce.Generic:
			// A generic NCCL error after the program's own exception (the
			// watchdog re-reporting a CUDA fault of a user kernel, the
			// sibling's aborted communicator) is that exception's, and the
			// exception is not ncclrun's to report.
			continue
		case excFirst && ce.KnockOn:
			d.KnockOnOf = KnockOnException
		case i > 0 && ce.FoldKnockOn && top.KnockOn && r.seq < rs[0].seq:
			// A lost peer seen before the consequence ranked first (a
			// store timeout that followed it) is no knock-on of it: it
			// stays, as the failure the survivors saw first.
		case i > 0 && ce.KnockOn && !top.Generic:
			// A lost peer, a watchdog timeout or an OOM after a specific
			// failure: say so (the entry's knock_on_note), or its own
			// advice ("an application stall") misleads.
			d.KnockOnOf = out[0].ID
			if ce.FoldKnockOn {
				continue // the peer that went away is the one that failed
			}
			if r.tier != 1 {
				break // seen before it: the note says "after"
			}
			if note, ok := expand(ce.KnockOnNote, map[string]string{"failure": out[0].ID}); ok && note != "" {
				d.Cause = note + " " + d.Cause
			}
		}
		if i > 0 && d.KnockOnOf == "" && !ce.Generic {
			// An error naming its peer by address (an IB completion
			// "from peer 10.1.0.6<port>") follows a failure on the
			// host whose own NCCL line showed that address.
			if h := m.peerHostOf(d.FirstLine); h != "" && (d.FirstFailure == nil || d.FirstFailure.Host != h) {
				for _, o := range keep {
					if o.FirstFailure != nil && o.FirstFailure.Host == h {
						d.KnockOnOf = o.ID
						break
					}
				}
			}
		}
		keep = append(keep, d)
	}
	return keep
}

// benignOnly reports whether st was seen only through benign patterns
// whose needs do not hold (Pattern.Benign): lines healthy jobs print,
// left out of Diagnoses beside any other cause, the generic one
// included, and which run prints only at exit.
func (m *Matcher) benignOnly(st *state) bool {
	any := false
	for _, s := range st.sights {
		if !m.sightActive(s) {
			continue
		}
		if !s.p.Benign || m.needsHold(s) {
			return false
		}
		any = true
	}
	return any
}

// explainsOther reports whether another active cause ranks after st
// (Pattern.After): the catalog says that cause follows from it (a NET
// plugin that failed to initialise because no device was found), so st
// is no harmless line there.
func (m *Matcher) explainsOther(st *state) bool {
	for _, o := range m.order {
		if o != st && m.isActive(o) && m.ranksAfter(o, st.ce.ID) {
			return true
		}
	}
	return false
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
