// Command ncclrun is an entrypoint shim for distributed GPU training: it
// checks what NCCL needs, fixes what it may, supervises the command and
// explains NCCL failures. See README.md.
package main

import (
	"os"
	"os/signal"
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
	os.Exit(run(os.Args, os.Stdin, os.Stdout, os.Stderr))
}
