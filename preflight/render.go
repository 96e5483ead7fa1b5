package preflight

import (
	"bytes"
	"fmt"
	"io"
	"strings"

	"github.com/ncclrun/ncclrun/internal/advice"
	"github.com/ncclrun/ncclrun/internal/printable"
	"github.com/ncclrun/ncclrun/internal/units"
)

// How a Report reads as text: doctor's table (WriteTable) and run's
// messages for the checks that warned or failed (WriteChecks). The caller
// owns the stream; these only lay out the words, each in one Write. What
// a check quotes of the files it read (a tree under --root may be anyone's
// snapshot) goes through printable.String: a terminal shows its control
// characters, and does not act on them.

// tableWidth is the width doctor's table is wrapped to.
const tableWidth = 100

// WriteTable writes doctor's human output: the environment, then a table
// of check, status and summary, with the fix of each warn or fail check
// below its row. Long text is wrapped under the summary column, and a fix
// that repeats an earlier one says so instead of repeating it.
func (r Report) WriteTable(w io.Writer) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "environment: %s", r.Environment.Kind)
	if r.Environment.Reason != "" {
		fmt.Fprintf(&b, " (%s)", printable.String(r.Environment.Reason))
	}
	b.WriteString("\n\n")
	idw, stw := len("CHECK"), len("STATUS")
	for _, c := range r.Checks {
		idw = max(idw, len(c.ID))
		stw = max(stw, len(c.Status))
	}
	indent := idw + 2 + stw + 2
	pad := strings.Repeat(" ", indent)
	width := max(40, tableWidth-indent)
	row := func(id, status, text string) {
		for i, l := range advice.Wrap(text, width) {
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
		row(c.ID, string(c.Status), printable.String(oneLine(c.Summary)))
		if c.Fix == "" || (c.Status != Warn && c.Status != Fail) {
			continue
		}
		if first, ok := fixOf[c.Fix]; ok {
			b.WriteString(pad + "fix: as for " + first + "\n")
			continue
		}
		fixOf[c.Fix] = c.ID
		for i, alt := range advice.Alternatives(printable.String(oneLine(c.Fix))) {
			lead, more := "fix: ", "     "
			if i > 0 {
				lead, more = "", "   "
			}
			for j, l := range advice.Wrap(alt, width-len(more)) {
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

// WriteChecks writes the checks whose status is in want, in report order,
// as run prints them: `ncclrun: <id>: <summary>` and `ncclrun:   fix: ...`.
// A fix already written for an earlier check (memlock and capabilities
// often share one) is not written again.
func (r Report) WriteChecks(w io.Writer, want ...Status) error {
	var b bytes.Buffer
	written := map[string]bool{}
	for _, c := range r.Checks {
		for _, s := range want {
			if c.Status != s {
				continue
			}
			b.Write(advice.Message("", c.ID+": "+printable.String(c.Summary)))
			if !written[c.Fix] && c.Fix != "" {
				b.Write(advice.Message("  ", advice.Layout(printable.String(c.Fix), "fix: ", "     ")))
			}
			written[c.Fix] = true
		}
	}
	_, err := w.Write(b.Bytes())
	return err
}

// oneLine keeps a table cell on one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// MemlockState is one sentence of CMD's memlock state, e.g.
// "RLIMIT_MEMLOCK 64 KiB (soft=hard), uid 1000, CAP_IPC_LOCK not
// effective": what the memlock diagnosis says the command ran with.
func (cs CommandState) MemlockState() string {
	lim := "RLIMIT_MEMLOCK " + units.FormatSize(cs.Memlock.Soft)
	if cs.Memlock.Soft == cs.Memlock.Hard {
		lim += " (soft=hard)"
	} else {
		lim += " (hard " + units.FormatSize(cs.Memlock.Hard) + ")"
	}
	capState := "CAP_IPC_LOCK not effective"
	if cs.IPCLockEffective {
		capState = "CAP_IPC_LOCK effective"
		if cs.Via != "" && cs.Via != "none" {
			capState += " (" + cs.Via + ")"
		}
	}
	return fmt.Sprintf("%s, uid %d, %s", lim, cs.UID, capState)
}
