// Command ncclrun is an entrypoint shim for distributed GPU training: it
// checks what NCCL needs, fixes what it may, supervises the command and
// explains NCCL failures. See README.md.
package main

import (
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/ncclrun/ncclrun/launcher"
)

func main() {
	launcher.MaybeTrampoline() // a re-executed ncclrun becomes CMD here and never returns
	launcher.SmallPages()
	// A closed stdout or stderr must fail ncclrun's own writes with EPIPE,
	// not kill it with SIGPIPE (the Go runtime's default for fds 1 and 2
	// when SIGPIPE is not notified): the exit status must stay the
	// child's. A caught signal is reset on exec, so CMD is unaffected.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	setMemoryLimit()
	os.Exit(run(os.Args, os.Stdin, os.Stdout, os.Stderr))
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
