// Package nccllog gets NCCL's lines from where they are besides CMD's
// output, and hands them to its caller; what they mean is the caller's
// business (the diagnosis package's matcher). Lines come as Lines, chunks
// of whole lines, the shape of CMD's relayed output, so that one seam
// takes every source (Split turns a reader into Lines).
//
// The sources are:
//   - Probe: the private directory NCCL writes its INFO log into while CMD
//     runs (NCCL_DEBUG_FILE), followed as it grows; the lines NCCL would
//     have printed at WARN go to CMD's stdout through a Gate as soon as
//     they are read, never waiting for CMD's line to end; ProbeOff says
//     when a run can have it (what kind of command CMD is comes from
//     internal/cmdkind);
//   - ExitFiles: NCCL_DEBUG_FILE's files (DebugFiles expands its %h and
//     %p) and torchrun's error file, read once CMD has exited, as CMD's
//     user, within bounds of size and time (TorchFile says where torchrun
//     writes the latter, ParseTorchrunError reads it);
//   - Open: a saved log, plain or compressed with gzip; bzip2, zstd and
//     xz are refused.
//
// Every file a less privileged process could have placed is opened
// through internal/safefile: a regular file reached without a symbolic
// link. Do not use this package for CMD's own output: that is relayed by
// the launcher.
package nccllog
