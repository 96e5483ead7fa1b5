package diagnosis

import (
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
)

// snapshot renders a state as a Diagnosis, applying the facts. Run's
// facts are this host's: a cause seen only on lines of other hosts
// (Facts.Host) is judged without them and names those hosts.
func (m *Matcher) snapshot(st *state) Diagnosis {
	ce := st.ce
	var src, titled *sight
	certain := false
	local := false
	var likelyHow string
	for i := range st.sights {
		s := &st.sights[i]
		if !m.sightActive(*s) {
			continue
		}
		if src == nil {
			src = s
		}
		if titled == nil && s.p.Title != "" && s.p.entry == ce {
			titled = s
		}
		local = local || s.local
		if s.p.certainty == Certain || (s.p.certainWith >= 0 && m.markerOn(s.p.certainWith)) ||
			m.termsHold(s.p.certainNeeds, s.local) {
			certain = true
		} else if likelyHow == "" {
			likelyHow = s.p.How
		}
	}
	facts := m.facts
	if !local {
		facts = Facts{}
	}
	d := Diagnosis{ID: ce.ID, Title: ce.Title, Cause: ce.Cause, Fix: ce.Fix, Lines: st.lines, HostsCapped: st.hostsCapped}
	d.Count, d.CountCapped = st.count()
	if src != nil {
		d.FirstLine = src.firstLine
		if !src.place.empty() {
			pl := src.place
			if r, ok := m.commRank[src.proc]; ok && pl.Rank == nil && src.proc.pid != 0 {
				pl.Rank = &r // NCCL's own comm line named the process's rank
			}
			d.FirstFailure = &pl
		}
		// A pattern's own cause/fix apply only to its own entry (not
		// after a reroute to another entry). The catch-all takes them
		// from its first titled sighting wherever it came: NCCL's plain
		// WARNs before the line that tells what failed say nothing more.
		if ce.Generic && titled != nil {
			src = titled
			if titled.p.How != "" && !certain {
				likelyHow = titled.p.How
			}
		}
		if src.p.entry == ce {
			if src.p.Title != "" {
				d.Title = src.p.Title
			}
			if src.p.Cause != "" {
				d.Cause = src.p.Cause
			}
			if src.p.Fix != "" {
				d.Fix = src.p.Fix
			}
			if src.p.Note != "" {
				d.Cause += " " + src.p.Note
			}
			if r, list, ok := src.p.waitedFor(src.firstLine); ok {
				// A timeout that names the rank it waited for: that
				// rank is where the failure is, not the waiting one.
				ff := &Place{Rank: &r}
				if d.FirstFailure != nil {
					ff.Time = d.FirstFailure.Time
				}
				d.FirstFailure = ff
				if strings.Contains(list, ",") {
					d.Cause += " The ranks waited for ranks " + list + "."
				} else {
					d.Cause += " The ranks waited for rank " + list + "."
				}
			}
		}
	}
	if likelyHow == "" {
		likelyHow = ce.How
	}
	if ce.Facts == FactsMemlock {
		if facts.Known {
			certain = true
			if facts.MemlockFix != "" {
				d.Fix = facts.MemlockFix
			}
		} else {
			certain = false
			if likelyHow == "" || likelyHow == ce.How {
				likelyHow = ce.UnknownHow
			}
		}
	}
	// The catalog's sentences that name what run saw (templates.go).
	if ce.FactCause != "" || ce.FactNote != "" {
		vals := factValues(facts)
		if s, ok := expand(ce.FactCause, vals); ok && s != "" {
			d.Cause = s
		}
		if s, ok := expand(ce.FactNote, vals); ok && s != "" {
			d.Cause += " " + s
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
	if m.facts.Known && m.facts.Host != "" && !local && len(d.Hosts) > 0 {
		// Another host's failure: the catalog's "this host" is that one.
		there := "the host that printed it (" + strings.Join(d.Hosts, ", ") + ")"
		d.Cause = strings.ReplaceAll(d.Cause, "this host", there)
		d.Fix = strings.ReplaceAll(d.Fix, "this host", there)
		d.How = strings.ReplaceAll(d.How, "this host", there)
		if ce.Facts != "" {
			d.Cause += fmt.Sprintf(" Seen on %s, not where ncclrun runs (%s): what preflight saw there does not apply; check it on %s.",
				strings.Join(d.Hosts, ", "), m.facts.Host, d.Hosts[0])
		}
	}
	if len(st.peers) > 0 {
		d.Peers = append([]string(nil), st.peers...)
		d.Cause += " Lost: " + strings.Join(d.Peers, ", ") + "."
		// The failure is on the peer that went away, not on the survivor
		// that printed it.
		ff := &Place{Host: shortHost(peerHost(d.Peers[0]))}
		if d.FirstFailure != nil {
			ff.Time = d.FirstFailure.Time
		}
		d.FirstFailure = ff
	}
	return d
}

// memlockAdequate reports whether a FactsMemlock sighting of ce goes to
// its AdequateID: run saw an adequate allowance, or (without run's facts)
// the log printed an unlimited limit before it (ce's AdequateMarker).
//
// A line of another host (local false) is judged without run's facts.
func (m *Matcher) memlockAdequate(ce *centry, local bool) bool {
	if m.facts.Known && local {
		return m.facts.MemlockAdequate
	}
	return ce.adequateMarker >= 0 && m.markerOn(ce.adequateMarker)
}

// factsAllow reports whether the facts let pattern p count on a line of
// this host (local) or another: its Unless fact does not hold and its
// When facts do. Run's facts are this host's: another host's line is
// judged as explain judges it.
func (m *Matcher) factsAllow(p *cpattern, local bool) bool {
	f := m.facts
	if !local {
		f = Facts{}
	}
	if p.Unless == UnlessNoRDMA && f.Known && f.NoRDMA {
		return false
	}
	// IBDisabled is the job's environment, which run passes to every
	// rank: it holds for lines of other hosts too.
	if p.Unless == UnlessIBDisabled && m.facts.Known && m.facts.IBDisabled {
		return false
	}
	return p.When == "" || factHolds(f, p.When)
}

// factHolds reports whether When fact name holds under f.
func factHolds(f Facts, name string) bool {
	switch name {
	case WhenRDMAUsable:
		return f.Known && len(f.RDMAPorts) > 0
	case WhenPeermemLoaded:
		return f.Known && f.GDRModule == GDRModuleNvidiaPeermem
	case WhenNoPeermem:
		return f.Known && f.GDRModule == GDRModuleNone
	}
	return false
}

// needsHold reports whether one of a benign sighting's Needs holds: its
// facts (for a line of this host) and its markers.
func (m *Matcher) needsHold(s sight) bool {
	return m.termsHold(s.p.needs, s.local)
}

// termsHold reports whether one of ts holds: its facts (for a line of
// this host, local) and its markers.
func (m *Matcher) termsHold(ts []needTerm, local bool) bool {
	for _, t := range ts {
		ok := true
		for _, f := range t.facts {
			if !local || !factHolds(m.facts, f) {
				ok = false
			}
		}
		for _, i := range t.markers {
			if ok && !m.markerOn(i) {
				ok = false
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// peerHost is a peer address without its port ("10.0.0.1:29500" ->
// "10.0.0.1"); an IPv6 address stays whole.
func peerHost(peer string) string {
	if strings.Count(peer, ":") != 1 {
		return peer
	}
	h, port, _ := strings.Cut(peer, ":")
	if port == "" || strings.Trim(port, "0123456789") != "" {
		return peer
	}
	return h
}

// shortHost is a host name cut at its first '.', as NCCL's line prefix
// names hosts (gethostname's short name), so that a lost peer a survivor
// names by its fully qualified name is the host of that peer's own
// lines; an IP address stays whole.
func shortHost(h string) string {
	if net.ParseIP(h) != nil {
		return h
	}
	if i := strings.IndexByte(h, '.'); i > 0 {
		return h[:i]
	}
	return h
}

// waitedFor returns the rank a timeout line names as the one waited for
// (the pattern's "rank" groups: a monitored barrier's stragglers, the
// rank whose unique id the store did not get): the first, and the list
// as printed.
func (p *cpattern) waitedFor(line string) (int, string, bool) {
	if len(p.rankGroups) == 0 {
		return 0, "", false
	}
	sm := p.regexp().FindStringSubmatch(line)
	for _, g := range p.rankGroups {
		if g < len(sm) && sm[g] != "" {
			first, _, _ := strings.Cut(sm[g], ",")
			r, err := strconv.Atoi(first)
			return r, sm[g], err == nil
		}
	}
	return 0, "", false
}
