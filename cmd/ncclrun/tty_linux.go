package main

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// terminal reports whether r is an *os.File open on a terminal (a
// character device such as /dev/null is not one).
func terminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
