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
// Without it the heap grows to twice what is live before a collection:
// the tap's buffers while it is behind a burst and the matcher's bounded
// state on a log of a million processes took `run` to 18-21 MiB of RSS
// and `explain` to 20, against a bound of 16 MiB whatever the input
// (docs/performance.md). With 14 MiB, explain of that log peaks at
// 15.9-16.4 MiB and run at 14.8-15.1; with 13 MiB at 15.0-15.3 and
// 14.5-14.8. A smaller limit slows explain of a healthy log (on a 2-core
// VM, a 256 MiB log: 0.13 s with 12 to 14 MiB, 0.14 s with
// 11, 0.26 s with 10); a process that stays under it (every healthy job)
// never notices it.
const memoryLimit = 13 << 20

// setMemoryLimit sets memoryLimit unless GOMEMLIMIT says otherwise (the
// runtime reads that variable itself).
func setMemoryLimit() {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(memoryLimit)
	}
}
