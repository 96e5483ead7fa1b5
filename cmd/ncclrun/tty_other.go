//go:build !linux

package main

import "io"

// terminal is false off Linux, where ncclrun is only built, not run.
func terminal(io.Reader) bool { return false }
