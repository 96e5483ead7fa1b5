package caps

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Get returns the calling thread's sets (capget(2), version 3).
func Get() (Sets, error) {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var d [2]unix.CapUserData
	if err := unix.Capget(&hdr, &d[0]); err != nil {
		return Sets{}, fmt.Errorf("capget: %w", err)
	}
	return Sets{
		Effective:   uint64(d[0].Effective) | uint64(d[1].Effective)<<32,
		Permitted:   uint64(d[0].Permitted) | uint64(d[1].Permitted)<<32,
		Inheritable: uint64(d[0].Inheritable) | uint64(d[1].Inheritable)<<32,
	}, nil
}

// Set replaces the calling thread's sets (capset(2), version 3).
func Set(s Sets) error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	d := [2]unix.CapUserData{
		{Effective: uint32(s.Effective), Permitted: uint32(s.Permitted), Inheritable: uint32(s.Inheritable)},
		{Effective: uint32(s.Effective >> 32), Permitted: uint32(s.Permitted >> 32), Inheritable: uint32(s.Inheritable >> 32)},
	}
	if err := unix.Capset(&hdr, &d[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	return nil
}

// InBounding reports whether capability c is in the bounding set
// (PR_CAPBSET_READ). A number the kernel does not know is not.
func InBounding(c int) bool {
	r, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, uintptr(c), 0, 0, 0)
	return err == nil && r == 1
}

// FileCaps reports whether path carries a file capability (the
// security.capability extended attribute); a file system without extended
// attributes carries none.
func FileCaps(path string) (bool, error) {
	n, err := unix.Getxattr(path, "security.capability", make([]byte, 64))
	if errors.Is(err, unix.ENODATA) || errors.Is(err, unix.ENOTSUP) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("getxattr %q security.capability: %w", path, err)
	}
	return n > 0, nil
}
