// Package fakenccl is a workload that plays NCCL (pins memory, prints NCCL's
// log lines) so ncclrun can be shown and tested without GPUs.
package fakenccl

import "io"

// Main runs the workload with args and returns its exit status. (Stub.)
func Main(args []string, stdout, stderr io.Writer) int { return 1 }
