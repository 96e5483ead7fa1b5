//go:build !linux

package fakenccl

import (
	"fmt"
	"os"
)

func gettid() int { return os.Getpid() }

// fallocate grows f with Truncate outside Linux (no ENOSPC detection).
func fallocate(f *os.File, size int64) error {
	if err := f.Truncate(size); err != nil {
		return fmt.Errorf("truncate %q to %d bytes: %w", f.Name(), size, err)
	}
	return nil
}
