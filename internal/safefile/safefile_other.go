//go:build !linux

package safefile

import (
	"fmt"
	"io"
	"os"
)

// Open is supported on Linux only.
func Open(path string) (*os.File, error) { return nil, ErrUnsupported }

// OpenFIFO is supported on Linux only.
func OpenFIFO(path string) (*os.File, error) { return nil, ErrUnsupported }

// Tail is supported on Linux only.
func Tail(f *os.File, max int64) (io.Reader, error) { return nil, ErrUnsupported }

// As is supported on Linux only: fn is not called.
func As(cred *Cred, fn func() error) <-chan error {
	done := make(chan error, 1)
	done <- ErrUnsupported
	close(done)
	return done
}

// WriteFile is os.WriteFile outside Linux, a symbolic link at path
// refused (ErrLinkKept) as on Linux.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		return fmt.Errorf("write %q: %w", path, ErrLinkKept)
	}
	return os.WriteFile(path, data, perm)
}
