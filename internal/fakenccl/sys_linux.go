//go:build linux

package fakenccl

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

func gettid() int { return unix.Gettid() }

// fallocate reserves size bytes of f as NCCL's shmutils does (fallocate
// mode 0), so a full tmpfs answers ENOSPC now instead of SIGBUS later.
func fallocate(f *os.File, size int64) error {
	if err := unix.Fallocate(int(f.Fd()), 0, 0, size); err != nil {
		return fmt.Errorf("fallocate %q to %d bytes: %w", f.Name(), size, err)
	}
	return nil
}
