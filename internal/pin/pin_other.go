//go:build !linux

package pin

import "fmt"

// Pin returns an error wrapping ErrUnsupported outside Linux.
func Pin(size int64) (release func(), err error) {
	return nil, fmt.Errorf("pin %d bytes: %w", size, ErrUnsupported)
}
