package main

import (
	"time"

	"github.com/ncclrun/ncclrun/internal/printable"
	"github.com/ncclrun/ncclrun/internal/safefile"
	"github.com/ncclrun/ncclrun/nccllog"
)

// sourceLines is nccllog.Lines for run's other sources of NCCL lines (the
// transport probe's files while CMD runs, NCCL_DEBUG_FILE's after it
// exits): they reach the matcher through the seam CMD's output takes,
// never shed, each diagnosis printed as it is found.
func (w *watch) sourceLines(chunk []byte) { w.Feed(chunk, false) }

// maxExitWarnings is how many files not read are named one by one.
const maxExitWarnings = 5

// exitFiles are the files run reads once CMD has exited, as CMD's user:
// NCCL_DEBUG_FILE's and torchrun's error file, those not older than since.
func exitFiles(p childPlan, j runJob, since time.Time) nccllog.ExitFiles {
	x := nccllog.ExitFiles{Pattern: p.debugFile, TorchFile: p.torchFile, Since: since}
	if j.user != nil {
		x.Cred = &safefile.Cred{UID: j.user.UID, GID: j.user.GID, Groups: j.user.Groups}
	}
	return x
}

// printExitWarnings prints the first maxExitWarnings warnings and how many
// more there were.
func printExitWarnings(e *env, warns []string) {
	for i, w := range warns {
		if i == maxExitWarnings {
			fprintf(e.stderr, "ncclrun: warning: %d more files not read\n", len(warns)-i)
			return
		}
		fprintf(e.stderr, "ncclrun: warning: %s\n", printable.String(w)) // names CMD chose
	}
}
