// Command ncclrun is an entrypoint shim for distributed GPU training: it
// checks what NCCL needs, fixes what it may, supervises the command and
// explains NCCL failures. See README.md.
package main

import (
	"os"
	"runtime/debug"

	"golang.org/x/sys/unix"

	"github.com/ncclrun/ncclrun/launcher"
)

func main() {
	launcher.MaybeTrampoline() // a re-executed ncclrun becomes CMD here and never returns
	launcher.SmallPages()
	setMemoryLimit()
	os.Exit(run(os.Args, os.Stdin, ownStdio(os.Stdout, 1), ownStdio(os.Stderr, 2)))
}

// ownStdio is ncclrun's own handle on its stdout or stderr (f, on
// descriptor fd): a duplicate of fd (close-on-exec), or f itself where
// none can be made.
// A closed output must fail ncclrun's writes with EPIPE, not kill it: the
// exit status must stay the child's, and a command whose reader went away
// ends quietly (stdout.go). The Go runtime kills a process whose write to
// descriptor 1 or 2 fails with EPIPE, unless it catches SIGPIPE; a
// duplicate is not 1 or 2, so EPIPE stays an error, without the round
// trip to the runtime's signal thread that catching a signal costs every
// start. CMD is given the same open file as its 1 or 2 either way.
func ownStdio(f *os.File, fd int) *os.File {
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 3)
	if err != nil {
		return f
	}
	return os.NewFile(uintptr(dup), f.Name())
}

// memoryLimit is the Go runtime's soft memory limit for ncclrun (what
// the runtime has mapped: the heap, freed pages not yet returned, stacks,
// its own structures; not the binary's pages, ~6 MiB of the RSS): past it
// the collector runs as often as it must, at most half of the CPU.
// Without it the heap grows to twice what is live before a collection,
// which on a burst the tap is behind, or a log of a million processes,
// takes the peak RSS past the 16 MiB it is to stay within whatever the
// input (docs/performance.md has the last measured figures). A smaller
// limit slows explain of a healthy log, whose live heap is a few MiB; a
// process that stays under it (every healthy job) never notices it.
const memoryLimit = 13 << 20

// setMemoryLimit sets memoryLimit unless GOMEMLIMIT says otherwise (the
// runtime reads that variable itself).
func setMemoryLimit() {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(memoryLimit)
	}
}
