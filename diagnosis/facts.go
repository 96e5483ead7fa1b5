package diagnosis

import (
	"sort"
)

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
	d := Diagnosis{ID: ce.ID, Title: ce.Title, Cause: ce.Cause, Fix: ce.Fix, Lines: st.lines, HostsCapped: st.hostsCapped}
	d.Count, d.CountCapped = st.count()
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
	if ce.Facts == FactsMemlock {
		if m.facts.Known {
			certain = true
			if m.facts.MemlockFix != "" {
				d.Fix = m.facts.MemlockFix
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
		vals := factValues(m.facts)
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
	return d
}

// memlockAdequate reports whether a FactsMemlock sighting of ce goes to
// its AdequateID: run saw an adequate allowance, or (without run's facts)
// the log printed an unlimited limit before it (ce's AdequateMarker).
func (m *Matcher) memlockAdequate(ce *centry) bool {
	if m.facts.Known {
		return m.facts.MemlockAdequate
	}
	return ce.adequateMarker >= 0 && m.markerOn(ce.adequateMarker)
}

// factsAllow reports whether the facts let pattern p count: its Unless
// fact does not hold and its When facts do.
func (m *Matcher) factsAllow(p *cpattern) bool {
	f := m.facts
	if p.Unless == UnlessNoRDMA && f.Known && f.NoRDMA {
		return false
	}
	switch p.When {
	case WhenRDMAUsable:
		return f.Known && len(f.RDMAPorts) > 0
	case WhenPeermemLoaded:
		return f.Known && f.GDRModule == GDRModuleNvidiaPeermem
	case WhenNoPeermem:
		return f.Known && f.GDRModule == GDRModuleNone
	}
	return true
}
