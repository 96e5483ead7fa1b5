package diagnosis

import (
	"fmt"
	"strconv"
	"strings"
)

// pick is one or many by n.
func pick(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// HangHeadline is the sentence that names the stalled ranks and hosts
// (or says every rank joined), first in explain's and run's text and in
// the termination message; "" for a nil h.
func HangHeadline(h *Hang) string {
	if h == nil {
		return ""
	}
	what := hangWhat(h)
	switch {
	case len(h.Stalled) == 0 && len(h.Waited) > 0 && h.Certainty != HangUnknown:
		s := fmt.Sprintf("hang: every rank (%s) joined %s and it did not finish: suspect the network, NCCL or the GPU, not the program", rankList(h.Waited), what)
		if h.warn != "" {
			s += "; NCCL warned first: " + h.warn
		}
		return s
	case len(h.Stalled) == 0:
		return fmt.Sprintf("hang: %s timed out; the lines do not tell which rank never joined it", what)
	case h.elsewhere:
		return fmt.Sprintf("hang: %s %s waited in %s for a rank on another node: %s %s ran elsewhere (this output holds none of their lines)",
			pick(len(h.Waited), "rank", "ranks"), rankList(h.Waited), what, pick(len(h.Stalled), "rank", "ranks"), stalledList(h.Stalled))
	}
	verb := "never joined"
	if h.Certainty == HangUnknown {
		verb = "printed nothing and may never have joined" // silence in a log that may hold only some ranks
	}
	s := fmt.Sprintf("hang: %s %s %s %s (%s)", pick(len(h.Stalled), "rank", "ranks"), stalledList(h.Stalled), verb, what, h.Certainty)
	if len(h.Waited) > 0 {
		s += "; " + pick(len(h.Waited), "rank ", "ranks ") + rankList(h.Waited) + " waited in it"
	}
	return s
}

// hangWhat names the collective: "ALLREDUCE #78 (numel 80) of process
// group 0".
func hangWhat(h *Hang) string {
	var b strings.Builder
	switch {
	case h.Op != "" && h.Op != "unknown":
		b.WriteString(h.Op)
	default:
		b.WriteString("the collective")
	}
	if h.Seq > 0 {
		b.WriteString(" #" + strconv.FormatInt(h.Seq, 10))
	}
	if h.Numel > 0 {
		fmt.Fprintf(&b, " (numel %d)", h.Numel)
	}
	if h.PG != "" {
		b.WriteString(" of process group " + h.PG)
	}
	return b.String()
}

// stalledList is "1 on node0, 3".
func stalledList(s []StalledRank) string {
	parts := make([]string, 0, len(s))
	for i, r := range s {
		if i == 16 {
			parts = append(parts, fmt.Sprintf("and %d more", len(s)-i))
			break
		}
		p := strconv.Itoa(r.Rank)
		if r.Host != "" {
			p += " on " + r.Host
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ", ")
}

// HangText is explain's and run's paragraph on a hang: the headline,
// the ranks that called another collective, the evidence and the
// stalled ranks' last lines.
func HangText(h *Hang) string {
	if h == nil {
		return ""
	}
	var b strings.Builder
	b.WriteString(HangHeadline(h) + "\n")
	for _, m := range h.OpMismatch {
		fmt.Fprintf(&b, "  rank %d called %s (numel %d) at that sequence: the ranks called different collectives\n", m.Rank, m.Op, m.Numel)
	}
	for _, e := range h.Evidence {
		b.WriteString("  evidence: " + firstOf(e) + "\n")
	}
	for _, s := range h.Stalled {
		ls := h.LastLines[strconv.Itoa(s.Rank)]
		if len(ls) == 0 {
			continue
		}
		fmt.Fprintf(&b, "  last lines of rank %d:\n", s.Rank)
		for _, l := range ls {
			b.WriteString("    " + l + "\n")
		}
	}
	if h.EvidenceDir != "" {
		b.WriteString("  evidence directory: " + h.EvidenceDir + "\n")
	}
	return b.String()
}

// ApplyHang puts what h says into the diagnoses and the first failure:
// the stalled rank is where the collective-timeout was first caused (it
// outranks the knock-on timeouts of the ranks that waited), and ranks
// that called different collectives add rank-mismatch.
func ApplyHang(ds []Diagnosis, first *Failure, h *Hang) ([]Diagnosis, *Failure) {
	if h == nil {
		return ds, first
	}
	var place *Place
	if len(h.Stalled) > 0 && h.Certainty != HangUnknown {
		r := h.Stalled[0].Rank
		place = &Place{Host: h.Stalled[0].Host, Rank: &r}
	}
	if place != nil {
		for i := range ds {
			if ds[i].ID == "collective-timeout" {
				p := *place
				ds[i].FirstFailure = &p
			}
		}
		if first == nil || first.ID == "collective-timeout" || first.ID == "peer-lost" {
			first = &Failure{ID: "collective-timeout", Place: *place, Line: HangHeadline(h)}
		}
	}
	if len(h.OpMismatch) > 0 {
		has := false
		for _, d := range ds {
			has = has || d.ID == "rank-mismatch"
		}
		if e, ok := DefaultCatalog().Entry("rank-mismatch"); ok && !has {
			r := h.OpMismatch[0].Rank
			ds = append(ds, Diagnosis{
				ID: e.ID, Title: e.Title, Count: len(h.OpMismatch), Lines: len(h.OpMismatch),
				Hosts: []string{}, FirstLine: firstOf(firstEvidence(h)),
				Cause:        fmt.Sprintf("At %s rank %d called %s (numel %d) while the others called %s (numel %d): the ranks called different collectives.", hangWhat(h), r, h.OpMismatch[0].Op, h.OpMismatch[0].Numel, h.Op, h.Numel),
				Fix:          e.Fix,
				Certainty:    Certain,
				FirstFailure: &Place{Rank: &r},
			})
		}
	}
	return ds, first
}

func firstEvidence(h *Hang) string {
	if len(h.Evidence) > 0 {
		return h.Evidence[0]
	}
	return ""
}
