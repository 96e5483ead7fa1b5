//go:build linux && !(mips || mipsle || mips64 || mips64le)

package launcher

import (
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// inheritedIgnore reports whether s's disposition is SIG_IGN now, as the
// kernel has it (rt_sigaction without a new action): what the Go runtime
// does not handle keeps what ncclrun inherited.
func inheritedIgnore(s os.Signal) bool {
	sig, ok := s.(syscall.Signal)
	if !ok {
		return false
	}
	var old [8]uintptr // the kernel's sigaction: the handler first (but on MIPS), then flags, restorer, mask
	_, _, errno := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), 0, uintptr(unsafe.Pointer(&old[0])), 8, 0, 0)
	return errno == 0 && old[0] == 1 // SIG_IGN
}
