package rlimit

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Memlock is RLIMIT_MEMLOCK's resource number, for Get and Set.
const Memlock = unix.RLIMIT_MEMLOCK

// Get returns this process's limit of resource (a unix.RLIMIT_* number).
func Get(resource int) (Limit, error) {
	var r unix.Rlimit
	if err := unix.Getrlimit(resource, &r); err != nil {
		return Limit{}, fmt.Errorf("getrlimit %s: %w", name(resource), err)
	}
	return Limit{Soft: fromKernel(r.Cur), Hard: fromKernel(r.Max)}, nil
}

// Set sets this process's limit of resource; children inherit it.
func Set(resource int, l Limit) error {
	r := unix.Rlimit{Cur: toKernel(l.Soft), Max: toKernel(l.Hard)}
	if err := unix.Setrlimit(resource, &r); err != nil {
		return fmt.Errorf("setrlimit %s %s: %w", name(resource), l, err)
	}
	return nil
}

func name(resource int) string {
	if resource == unix.RLIMIT_MEMLOCK {
		return "RLIMIT_MEMLOCK"
	}
	return fmt.Sprintf("resource %d", resource)
}
