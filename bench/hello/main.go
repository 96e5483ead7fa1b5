// Command hello is the start-up reference of scripts/bench.sh: the smallest
// static Go program, so that ncclrun's start can be read against what any
// Go binary costs before it does anything.
package main

import "os"

func main() { _, _ = os.Stdout.WriteString("hello\n") }
