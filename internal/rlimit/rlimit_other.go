//go:build !linux

package rlimit

// Memlock stands for RLIMIT_MEMLOCK; Get and Set refuse it here.
const Memlock = 8

// Get returns ErrUnsupported.
func Get(int) (Limit, error) { return Limit{}, ErrUnsupported }

// Set returns ErrUnsupported.
func Set(int, Limit) error { return ErrUnsupported }
