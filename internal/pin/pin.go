// Package pin locks memory the way NCCL's registrations need it pinned.
//
// Pin is the load of the fake-nccl workload and of the probe behind
// doctor's --probe (`ncclrun probe-mlock SIZE`, which is ProbeHere).
// It uses mlock(2), which the kernel checks against RLIMIT_MEMLOCK with
// the same CAP_IPC_LOCK bypass that ibv_reg_mr's ib_umem_get applies
// (docs/research/capabilities.md §1.2, §1.3): a size that Pin can lock,
// NCCL can register, and the errno is the same.
//
// Do not use this package to lock a process's whole address space: it never
// calls mlockall(2), which counts the entire virtual size (about 1 GiB for a
// Go program) against the limit and fails under 8 MiB with nothing locked.
package pin

import "errors"

// ErrUnsupported is returned by Pin on platforms without mlock(2) semantics
// that ncclrun knows (everything but Linux).
var ErrUnsupported = errors.New("pin: memory locking is only supported on Linux")

// ErrBadSize is wrapped by the error Pin returns for a size that is zero or
// negative.
var ErrBadSize = errors.New("pin: size must be positive")
