package diagnosis

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/ncclrun/ncclrun/internal/printable"
)

// maxFirstLine bounds Diagnosis.FirstLine.
const maxFirstLine = 2048

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
	if d.Count > 0 || len(d.Hosts) > 0 {
		b.WriteString(", " + Reach(d))
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
	if d.FirstFailure != nil && !d.FirstFailure.empty() {
		b.WriteString("where: " + d.FirstFailure.String() + "\n")
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
	if loc := p.regexp().FindIndex(line); loc != nil {
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
	return quoteLine(b)
}

// quoteLine is how a diagnosis quotes a line of the log (its first line,
// the program's exception): trimmed, as printable text, at most
// maxFirstLine bytes.
func quoteLine(b []byte) string {
	return cut(printable.String(string(bytes.TrimSpace(b))), maxFirstLine)
}

// ListedHosts is how many hosts Reach names before "and N more".
const ListedHosts = 8

// Reach says who reported d in a bounded phrase: "16 processes on node-a,
// node-b", at most ListedHosts hosts named, "and 4 more" after them; a
// count or host list that reached the matcher's caps (CountCapped,
// HostsCapped) reads "4096+ processes" and "and 1016+ more".
func Reach(d Diagnosis) string {
	var b strings.Builder
	plus := ""
	if d.CountCapped {
		plus = "+"
	}
	fmt.Fprintf(&b, "%d%s process", d.Count, plus)
	if d.Count != 1 || d.CountCapped {
		b.WriteString("es")
	}
	if len(d.Hosts) > 0 {
		hs, more := d.Hosts, ""
		if len(hs) > ListedHosts {
			hs = hs[:ListedHosts]
		}
		if n := len(d.Hosts) - len(hs); n > 0 || d.HostsCapped {
			more = fmt.Sprintf(" and %d more", n)
			if d.HostsCapped {
				more = fmt.Sprintf(" and %d+ more", n)
			}
		}
		b.WriteString(" on " + strings.Join(hs, ", ") + more)
	}
	return b.String()
}

// FailureText says what and where a first failure was, for people:
// "KeyError: 'input_ids' (rank 0 on node-a)" for an exception, "shm on
// node-b at 2025-06-01 10:00:03: <its first line>" for a diagnosis.
func FailureText(f *Failure) string {
	if f == nil {
		return ""
	}
	where := f.Place.String()
	if f.ID == "" {
		if where == "" {
			return f.Line
		}
		return f.Line + " (" + where + ")"
	}
	s := f.ID
	if where != "" {
		s += " (" + where + ")"
	}
	if f.Line != "" {
		s += ": " + f.Line
	}
	return s
}

// KnockOnText says what d is a consequence of ("" for a cause of its
// own): "knock-on of shm", "knock-on of the first failure (an exception)".
func KnockOnText(d Diagnosis) string {
	switch d.KnockOnOf {
	case "":
		return ""
	case KnockOnException:
		return "knock-on of the first failure (the program's exception)"
	}
	return "knock-on of " + d.KnockOnOf
}
