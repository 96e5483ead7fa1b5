// Package diagnosis turns the output of an NCCL job (NCCL's own WARN/INFO
// lines, PyTorch's ProcessGroupNCCL errors, torchrun, aws-ofi-nccl,
// libfabric, UCX, libibverbs) into one actionable diagnosis per cause.
//
// The failure knowledge is data: diagnosis/catalog/ (embedded, one
// file per entry, loaded in file-name order) lists entries
// with regular expressions, the literals that drive a one-pass
// Aho-Corasick prefilter, priorities, certainty and samples. A Matcher is
// fed one line at a time (the launcher's tap) and reports each cause on
// its first sighting; Explain does the same over a saved log. A Watch is a
// Matcher fed while a command runs, which writes each cause as it is
// found; Message, Summary and WriteExplain are how a diagnosis reads as
// text.
//
// The line formats it follows are NCCL's src/debug.cc (ncclDebugLogV) and
// the message texts of NCCL 2.1 to 2.30, as collected in the project's
// docs/research/nccl-messages.md.
//
// Do not use it to decide whether a job failed (that is the exit status)
// or to parse NCCL's INFO output for topology or performance data: it only
// recognises failures and the few observations that predict them.
//
// The package never exits and owns no stream: it writes only to an
// io.Writer its caller gives it. Besides the standard library it imports
// only internal/advice and internal/units, which import nothing else.
package diagnosis
