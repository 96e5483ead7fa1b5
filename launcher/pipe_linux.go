package launcher

import (
	"os"

	"golang.org/x/sys/unix"
)

// childPipeSize is the size asked for the pipes of the child's output
// (ncclrun's own, never its caller's).
const childPipeSize = 1 << 20

// growPipe enlarges the pipe the child writes its output to, so that a
// burst needs fewer reads and wake-ups: to childPipeSize (the default
// /proc/sys/fs/pipe-max-size), else to 256 KiB, else it stays as it is
// (an unprivileged process past its pipe allowance gets EPERM).
func growPipe(f *os.File) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		for _, n := range []int{childPipeSize, 256 << 10} {
			if _, err := unix.FcntlInt(fd, unix.F_SETPIPE_SZ, n); err == nil {
				return
			}
		}
	})
}
