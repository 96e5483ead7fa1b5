package main

import (
	"io"
	"os"
	"strings"

	"github.com/ncclrun/ncclrun/diagnosis"
	"github.com/ncclrun/ncclrun/internal/advice"
)

// scanHangs makes run's watch look for a hung collective (docs/hangs.md),
// knowing this host and the job's size as CMD gives it.
func scanHangs(w *watch, j runJob) {
	host, _ := os.Hostname()
	if i := strings.IndexByte(host, '.'); i > 0 {
		host = host[:i]
	}
	world, per := diagnosis.WorldFromCommand(append([]string{j.path}, j.args...))
	w.ScanHangs(host, world, per)
}

// writeHang writes run's paragraph on a hang, each line as ncclrun's own.
func writeHang(out io.Writer, h *diagnosis.Hang) {
	text := strings.TrimRight(diagnosis.HangText(h), "\n")
	for _, l := range strings.Split(text, "\n") {
		_, _ = out.Write(advice.Message("", l))
	}
}

// hangTermination leads the termination message on a hang: the headline
// that names the stalled rank and host, then the node's view in one line
// (diagnosis.HangViewTag) for explain to merge from the pods' messages.
// It takes at most half the message.
func hangTermination(h *diagnosis.Hang, v *diagnosis.HangView) string {
	if h == nil {
		return ""
	}
	head := "ncclrun: " + diagnosis.HangHeadline(h)
	head = truncate(head, terminationLimit/4) + "\n"
	if v != nil {
		head += v.TerminationView(terminationLimit/2 - len(head))
	}
	return head
}
