// Package demo is the README's first command: a failing run under a
// default container's limits, its diagnosis, then the fixed run.
package demo

import "io"

// Run runs the demo using self (the ncclrun binary); it returns the exit status. (Stub.)
func Run(self string, stdout, stderr io.Writer) int { return 1 }
