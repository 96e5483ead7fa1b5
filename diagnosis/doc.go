// Package diagnosis turns the output of an NCCL job (NCCL's own WARN/INFO
// lines, PyTorch's ProcessGroupNCCL errors, torchrun, aws-ofi-nccl,
// libfabric, UCX, libibverbs) into one actionable diagnosis per cause.
//
// The failure knowledge is data: diagnosis/catalog/ (embedded, one
// file per entry, loaded in file-name order) lists entries
// with regular expressions, the literals that drive a one-pass
// Aho-Corasick prefilter, priorities, certainty and samples. A Matcher is
// fed one line at a time (the launcher's tap) and reports each cause on
// its first sighting; Explain does the same over a saved log.
//
// The line formats it follows are NCCL's src/debug.cc (ncclDebugLogV) and
// the message texts of NCCL 2.1 to 2.30, as collected in the project's
// docs/research/nccl-messages.md.
//
// Do not use it to decide whether a job failed (that is the exit status)
// or to parse NCCL's INFO output for topology or performance data: it only
// recognises failures and the few observations that predict them.
//
// The package prints nothing and never exits; it imports only the
// standard library.
package diagnosis
