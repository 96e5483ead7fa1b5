package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/ncclrun/ncclrun/diagnosis"
	"github.com/ncclrun/ncclrun/preflight"
)

// msgLines writes text as ncclrun messages: every line prefixed with
// "ncclrun: " and indent, in one Write so it does not interleave with the
// child's relayed stderr.
func msgLines(indent, text string) []byte {
	var b bytes.Buffer
	for _, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		b.WriteString("ncclrun: " + indent + l + "\n")
	}
	return b.Bytes()
}

// checkMessage renders a check as run prints it: `ncclrun: <id>: <summary>`
// and `ncclrun:   fix: ...`; withFix false leaves the fix out.
func checkMessage(c preflight.Result, withFix bool) []byte {
	var b bytes.Buffer
	b.Write(msgLines("", c.ID+": "+c.Summary))
	if withFix && c.Fix != "" {
		b.Write(msgLines("  ", fixText(c.Fix, "fix: ", "     ")))
	}
	return b.Bytes()
}

// printChecks prints the checks whose status is in want, in report order.
// A fix already printed for an earlier check (memlock and capabilities
// often share one) is not printed again.
// printTreeWarnings prints one line per file of a --root tree that
// preflight refused to read (a FIFO, a device, a link out of the tree, a
// file over the size bound).
func printTreeWarnings(w io.Writer, r preflight.Report) {
	for _, m := range r.Warnings {
		fprintf(w, "ncclrun: warning: --root: %s\n", m)
	}
}

func printChecks(w io.Writer, r preflight.Report, want ...preflight.Status) {
	var b bytes.Buffer
	printed := map[string]bool{}
	for _, c := range r.Checks {
		for _, s := range want {
			if c.Status == s {
				b.Write(checkMessage(c, !printed[c.Fix]))
				printed[c.Fix] = true
			}
		}
	}
	_, _ = w.Write(b.Bytes())
}

// diagnosisMessage is how run prints a diagnosis when first seen: the
// headline (title and cause), then the fix.
func diagnosisMessage(d diagnosis.Diagnosis) []byte {
	var b bytes.Buffer
	head := d.Title
	if d.Cause != "" {
		head += ": " + d.Cause
	}
	b.Write(msgLines("", head))
	if d.Fix != "" {
		b.Write(msgLines("  ", fixText(d.Fix, "fix: ", "     ")))
	}
	if d.Certainty == "likely" && d.How != "" {
		b.Write(msgLines("  ", "to be sure: "+d.How))
	}
	return b.Bytes()
}

// plural renders "1 process" / "3 processes".
func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

// reach says who reported a diagnosis: "16 processes on node-a, node-b (48 lines)".
// It is bounded whatever the log: at most diagnosis.ListedHosts hosts are
// named, then "and N more"; a count or host list that reached the
// matcher's cap reads "4096+ processes", "and 1016+ more".
func reach(d diagnosis.Diagnosis) string {
	return diagnosis.Reach(d) + " (" + plural(d.Lines, "line", "lines") + ")"
}

// summaryMessage is run's summary at exit: the first failure, then one
// line per diagnosis (a knock-on says of what).
func summaryMessage(ds []diagnosis.Diagnosis, first *diagnosis.Failure, exitCode int, sig string) []byte {
	var b bytes.Buffer
	how := fmt.Sprintf("exit status %d", exitCode)
	if sig != "" {
		how = fmt.Sprintf("killed by %s, exit status %d", sig, exitCode)
	}
	b.Write(msgLines("", fmt.Sprintf("summary: %s found in the output of CMD (%s)",
		plural(len(ds), "cause", "causes"), how)))
	if first != nil {
		b.Write(msgLines("  ", "first failure: "+diagnosis.FailureText(first)))
	}
	for _, d := range ds {
		line := fmt.Sprintf("%s: %s, %s", d.ID, d.Title, reach(d))
		if k := diagnosis.KnockOnText(d); k != "" {
			line += "; " + k
		}
		b.Write(msgLines("  ", line))
	}
	return b.Bytes()
}

// doctorWidth is the width doctor's table is wrapped to.
const doctorWidth = 100

// writeDoctorTable renders doctor's human output: the environment, then a
// table of check, status and summary, with the fix of each warn or fail
// check below its row. Long text is wrapped under the summary column, and a
// fix that repeats an earlier one says so instead of repeating it.
func writeDoctorTable(w io.Writer, r preflight.Report) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "environment: %s", r.Environment.Kind)
	if r.Environment.Reason != "" {
		fmt.Fprintf(&b, " (%s)", r.Environment.Reason)
	}
	b.WriteString("\n\n")
	idw, stw := len("CHECK"), len("STATUS")
	for _, c := range r.Checks {
		idw = max(idw, len(c.ID))
		stw = max(stw, len(c.Status))
	}
	indent := idw + 2 + stw + 2
	pad := strings.Repeat(" ", indent)
	width := max(40, doctorWidth-indent)
	row := func(id, status, text string) {
		for i, l := range wrap(text, width) {
			if i == 0 {
				fmt.Fprintf(&b, "%-*s  %-*s  %s\n", idw, id, stw, status, l)
			} else {
				b.WriteString(pad + l + "\n")
			}
		}
	}
	row("CHECK", "STATUS", "SUMMARY")
	fixOf := map[string]string{}
	for _, c := range r.Checks {
		row(c.ID, string(c.Status), oneLine(c.Summary))
		if c.Fix == "" || (c.Status != preflight.Warn && c.Status != preflight.Fail) {
			continue
		}
		if first, ok := fixOf[c.Fix]; ok {
			b.WriteString(pad + "fix: as for " + first + "\n")
			continue
		}
		fixOf[c.Fix] = c.ID
		for i, alt := range fixAlternatives(oneLine(c.Fix)) {
			lead, more := "fix: ", "     "
			if i > 0 {
				lead, more = "", "   "
			}
			for j, l := range wrap(alt, width-len(more)) {
				if j == 0 {
					b.WriteString(pad + lead + l + "\n")
				} else {
					b.WriteString(pad + more + l + "\n")
				}
			}
		}
	}
	_, err := w.Write(b.Bytes())
	return err
}

// wrap breaks text into lines of at most width bytes at spaces (a longer
// word stays whole on its own line).
func wrap(text string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(text) {
		switch {
		case line == "":
			line = word
		case len(line)+1+len(word) <= width:
			line += " " + word
		default:
			lines = append(lines, line)
			line = word
		}
	}
	return append(lines, line)
}

// oneLine keeps a table cell on one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// writeExplain renders explain's human output: the first failure, then
// each diagnosis (a knock-on says of what).
func writeExplain(w io.Writer, ds []diagnosis.Diagnosis, first *diagnosis.Failure) error {
	var b bytes.Buffer
	if len(ds) == 0 {
		b.WriteString("no NCCL failure found\n")
	}
	if first != nil {
		fmt.Fprintf(&b, "first failure: %s\n\n", diagnosis.FailureText(first))
	}
	for i, d := range ds {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "%s: %s\n", d.ID, d.Title)
		if k := diagnosis.KnockOnText(d); k != "" {
			fmt.Fprintf(&b, "  %s\n", k)
		}
		fmt.Fprintf(&b, "  seen:  %s\n", reach(d))
		if d.FirstFailure != nil && d.FirstFailure.String() != "" {
			fmt.Fprintf(&b, "  where: %s\n", d.FirstFailure.String())
		}
		if d.FirstLine != "" {
			fmt.Fprintf(&b, "  first: %s\n", d.FirstLine)
		}
		if d.Cause != "" {
			fmt.Fprintf(&b, "  cause: %s\n", d.Cause)
		}
		if d.Fix != "" {
			b.WriteString(fixText(d.Fix, "  fix:   ", "         ") + "\n")
		}
		if d.Certainty == "likely" && d.How != "" {
			fmt.Fprintf(&b, "  to be sure: %s\n", d.How)
		}
	}
	_, err := w.Write(b.Bytes())
	return err
}

// writeJSON writes v as indented JSON and a newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// nonNil keeps an empty list an empty JSON array, not null.
func nonNil(ds []diagnosis.Diagnosis) []diagnosis.Diagnosis {
	if ds == nil {
		return []diagnosis.Diagnosis{}
	}
	return ds
}

// fixAlternatives splits a fix that offers several ways ("do A; or do B;
// or do C") into one alternative each, so that each can start a line.
func fixAlternatives(fix string) []string {
	alts := strings.Split(fix, "; or ")
	for i := 1; i < len(alts); i++ {
		alts[i] = "or " + alts[i]
	}
	return alts
}

// fixText renders a fix with each alternative on a line of its own: the
// first after lead, the others after indent.
func fixText(fix, lead, indent string) string {
	alts := fixAlternatives(fix)
	for i := range alts {
		if i == 0 {
			alts[i] = lead + alts[i]
		} else {
			alts[i] = indent + alts[i]
		}
	}
	return strings.Join(alts, "\n")
}
