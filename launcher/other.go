//go:build !linux

package launcher

import "os"

// Run is supported on Linux only; elsewhere it returns ErrUnsupported.
func Run(cfg Config) (Result, error) { return Result{}, ErrUnsupported }

// Exec is supported on Linux only; elsewhere it returns ErrUnsupported.
func Exec(cfg Config) error { return ErrUnsupported }

// RaiseMemlock is supported on Linux only; elsewhere it returns ErrUnsupported.
func RaiseMemlock() (MemlockChange, error) { return MemlockChange{}, ErrUnsupported }

// MaybeTrampoline does nothing outside Linux, where Run never re-executes
// ncclrun.
func MaybeTrampoline() {}

// SmallPages does nothing outside Linux.
func SmallPages() {}

// Environ is os.Environ() outside Linux.
func Environ() []string { return os.Environ() }

// CatchSignals does nothing outside Linux.
func CatchSignals() {}

// Terminating is a channel that never delivers outside Linux.
func Terminating() <-chan os.Signal { return nil }
