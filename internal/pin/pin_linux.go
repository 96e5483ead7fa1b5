//go:build linux

package pin

import (
	"fmt"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/ncclrun/ncclrun/internal/units"
)

// Pin maps size bytes of anonymous private memory and locks them with
// mlock(2) (never mlockall). On success the memory stays resident and
// counted in the process's VmLck until release is called; release unlocks
// and unmaps it and may be called more than once.
//
// The error wraps the unix.Errno of the failing call, to be matched with
// errors.Is: from mlock, unix.ENOMEM means size is over RLIMIT_MEMLOCK (less
// what is already locked) and the thread lacks CAP_IPC_LOCK, unix.EPERM that
// the limit is 0 and the thread lacks CAP_IPC_LOCK. An mmap failure (the
// message says which call failed) is about address space, not the limit.
// A size <= 0 gives an error wrapping ErrBadSize.
//
// Capabilities are per thread: Pin answers for the calling thread, which is
// the whole process unless someone changed one thread's capabilities.
func Pin(size int64) (release func(), err error) {
	if size <= 0 {
		return nil, fmt.Errorf("pin %d bytes: %w", size, ErrBadSize)
	}
	if int64(int(size)) != size {
		return nil, fmt.Errorf("pin %s: %w", units.FormatSize(size), unix.EOVERFLOW)
	}
	mem, err := unix.Mmap(-1, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("mmap %s for pinning: %w", units.FormatSize(size), err)
	}
	if err := unix.Mlock(mem); err != nil {
		_ = unix.Munmap(mem)
		return nil, fmt.Errorf("mlock %s: %w", units.FormatSize(size), err)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			_ = unix.Munlock(mem)
			_ = unix.Munmap(mem)
		})
	}, nil
}
