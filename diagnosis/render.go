package diagnosis

import (
	"bytes"
	"fmt"
	"io"

	"github.com/ncclrun/ncclrun/internal/advice"
)

// How diagnoses read as text: run's messages on stderr (Message, Summary)
// and explain's report (WriteExplain). The caller owns the stream; these
// only lay out the words.

// Message is how run prints a diagnosis when first seen: the headline
// (title and cause), then the fix, each line led by "ncclrun: ".
func Message(d Diagnosis) []byte {
	var b bytes.Buffer
	head := d.Title
	if d.Cause != "" {
		head += ": " + d.Cause
	}
	b.Write(advice.Message("", head))
	if d.Fix != "" {
		b.Write(advice.Message("  ", advice.Layout(d.Fix, "fix: ", "     ")))
	}
	if d.Certainty == Likely && d.How != "" {
		b.Write(advice.Message("  ", "to be sure: "+d.How))
	}
	return b.Bytes()
}

// Summary is run's summary at exit: how CMD ended (sig is the name of the
// signal that killed it, "" when it exited), the first failure, then one
// line per diagnosis (a knock-on says of what).
func Summary(ds []Diagnosis, first *Failure, exitCode int, sig string) []byte {
	var b bytes.Buffer
	how := fmt.Sprintf("exit status %d", exitCode)
	if sig != "" {
		how = fmt.Sprintf("killed by %s, exit status %d", sig, exitCode)
	}
	b.Write(advice.Message("", fmt.Sprintf("summary: %s found in the output of CMD (%s)",
		plural(len(ds), "cause", "causes"), how)))
	if first != nil {
		b.Write(advice.Message("  ", "first failure: "+FailureText(first)))
	}
	for _, d := range ds {
		line := fmt.Sprintf("%s: %s, %s", d.ID, d.Title, reachLines(d))
		if k := KnockOnText(d); k != "" {
			line += "; " + k
		}
		b.Write(advice.Message("  ", line))
	}
	return b.Bytes()
}

// WriteExplain writes explain's human report to w in one Write: the first
// failure, then each diagnosis (a knock-on says of what).
func WriteExplain(w io.Writer, ds []Diagnosis, first *Failure) error {
	var b bytes.Buffer
	if len(ds) == 0 {
		b.WriteString("no NCCL failure found\n")
	}
	if first != nil {
		fmt.Fprintf(&b, "first failure: %s\n\n", FailureText(first))
	}
	for i, d := range ds {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "%s: %s\n", d.ID, d.Title)
		if k := KnockOnText(d); k != "" {
			fmt.Fprintf(&b, "  %s\n", k)
		}
		fmt.Fprintf(&b, "  seen:  %s\n", reachLines(d))
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
			b.WriteString(advice.Layout(d.Fix, "  fix:   ", "         ") + "\n")
		}
		if d.Certainty == Likely && d.How != "" {
			fmt.Fprintf(&b, "  to be sure: %s\n", d.How)
		}
	}
	_, err := w.Write(b.Bytes())
	return err
}

// reachLines says who reported a diagnosis and in how many lines: "16
// processes on node-a, node-b (48 lines)"; bounded as Reach is.
func reachLines(d Diagnosis) string {
	return Reach(d) + " (" + plural(d.Lines, "line", "lines") + ")"
}

// plural renders "1 process" / "3 processes".
func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}
