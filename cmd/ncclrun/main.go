// Command ncclrun is an entrypoint shim for distributed GPU training: it
// checks what NCCL needs, fixes what it may, supervises the command and
// explains NCCL failures. See README.md.
package main

import (
	"os"

	"github.com/ncclrun/ncclrun/launcher"
)

func main() {
	launcher.MaybeTrampoline() // a re-executed ncclrun becomes CMD here and never returns
	os.Exit(run(os.Args, os.Stdin, os.Stdout, os.Stderr))
}
