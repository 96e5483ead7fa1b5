package main

import (
	"fmt"
	"io"
)

// run is ncclrun with its arguments and stdio; it returns the exit status.
// (Skeleton: being written.)
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "ncclrun: not yet")
	return 2
}
