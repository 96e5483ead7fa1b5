// Package preflight checks what NCCL needs from the host or container it is
// about to run in: RLIMIT_MEMLOCK, CAP_IPC_LOCK in the right capability sets,
// RDMA devices and their /dev/infiniband nodes, /dev/shm, GPUs, GPUDirect RDMA
// and the socket interfaces NCCL will pick.
//
// Run reads every fact under Options.Root: "" or "/" is the live system
// (system calls such as prlimit(2), statfs(2) and open(2) on /dev/infiniband
// are used there), any other directory is a snapshot tree holding the same
// relative paths (proc/self/status, proc/self/limits, sys/class/infiniband,
// dev/...). A tree is untrusted input: it is read through an os.Root of
// it, so links are followed only within it, and only regular files are
// opened, never blocking, with a size bound; each file refused is one
// line of Report.Warnings. Under a tree the environment judged is the
// tree's own (EnvFile, else proc/self/environ). Record runs the same readers and reports every read:
// preflight/snapshot copies a system by it.
//
// Report carries typed Facts (memlock verdict, shm size, RDMA devices,
// GPUDirect) and the Platform for the packages that act on them; each
// check's Details are only its JSON rendering; WriteTable and WriteChecks
// are how a Report reads as text, written to an io.Writer the caller gives.
// The package owns no stream, never exits and never changes the system:
// raising limits and starting probes is the caller's business
// (Options.MemlockBefore, Options.Prober).
//
// Do not use it to configure NCCL beyond SuggestEnv: NCCL detects most of
// its settings better by itself.
package preflight
