// Package rlimit owns ncclrun's one type for a resource limit, Limit (a
// soft/hard pair: int64 bytes, Unlimited (-1) for RLIM_INFINITY), reads
// and sets this process's limits with it, and parses and formats it as
// --memlock takes it (SOFT:HARD). Every conversion from the kernel's
// unsigned value goes through one function (fromKernel), so "infinity" is
// decided by one test.
//
// Do not use it for another process's limits (prlimit(2) on a pid): it
// only acts on the calling process.
package rlimit

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/ncclrun/ncclrun/internal/units"
)

// Limit is a soft/hard pair in bytes; Unlimited (-1) means RLIM_INFINITY.
// The zero value is a limit of 0 bytes. It is the one limit type of
// ncclrun: preflight, pinrule, lint, the launcher and the CLI all pass it.
type Limit struct {
	Soft int64 `json:"soft"`
	Hard int64 `json:"hard"`
}

// Unlimited is RLIM_INFINITY in a Limit (units.Unlimited).
const Unlimited = units.Unlimited

// IsUnlimited is the one RLIM_INFINITY test of a Limit value: any
// negative value (Unlimited, or what a caller wrote as -2) is infinity, as
// toKernel makes it.
func IsUnlimited(v int64) bool { return v < 0 }

// Above reports whether limit value a exceeds b, Unlimited being the
// largest value, as setrlimit(2) compares them.
func Above(a, b int64) bool { return !IsUnlimited(b) && (IsUnlimited(a) || a > b) }

// String formats l as SOFT:HARD, exactly, in the form --memlock takes and
// Parse reads back: "64KiB:8MiB", "100000:unlimited".
func (l Limit) String() string {
	return exactSize(l.Soft) + ":" + exactSize(l.Hard)
}

// exactSize is v in the largest binary unit that divides it, "unlimited"
// for Unlimited.
func exactSize(v int64) string {
	if IsUnlimited(v) {
		return "unlimited"
	}
	for _, u := range []struct {
		s string
		n int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if v >= u.n && v%u.n == 0 {
			return strconv.FormatInt(v/u.n, 10) + u.s
		}
	}
	return strconv.FormatInt(v, 10)
}

// ErrMalformed is wrapped by ParseProc's error for text that is not a limit.
var ErrMalformed = errors.New("malformed limit")

// ErrUnsupported is returned by Get and Set where there are no Linux limits.
var ErrUnsupported = errors.New("resource limits need Linux")

// fromKernel converts the kernel's value to a Limit value: RLIM_INFINITY,
// and anything else too large for an int64 byte count, is Unlimited.
func fromKernel(v uint64) int64 {
	if v > math.MaxInt64 {
		return units.Unlimited
	}
	return int64(v)
}

// toKernel converts a Limit value to the kernel's: any negative value is
// RLIM_INFINITY (all bits set on Linux).
func toKernel(v int64) uint64 {
	if IsUnlimited(v) {
		return math.MaxUint64
	}
	return uint64(v)
}

// Parse reads a limit as --memlock takes it: SIZE for both, or SOFT:HARD
// (units.ParseSize's sizes, "unlimited" among them); a soft limit above
// the hard one is an error.
func Parse(s string) (Limit, error) {
	soft, hard, pair := strings.Cut(s, ":")
	sv, err := units.ParseSize(soft)
	if err != nil {
		return Limit{}, err
	}
	hv := sv
	if pair {
		if hv, err = units.ParseSize(hard); err != nil {
			return Limit{}, err
		}
		if Above(sv, hv) {
			return Limit{}, fmt.Errorf("soft limit %s is above hard limit %s", units.FormatSize(sv), units.FormatSize(hv))
		}
	}
	return Limit{Soft: sv, Hard: hv}, nil
}

// ParseProc parses one value column of /proc/<pid>/limits (fs/proc/base.c
// proc_pid_limits): "unlimited", or a decimal number that fromKernel
// converts. Errors wrap ErrMalformed.
func ParseProc(s string) (int64, error) {
	if s == "unlimited" {
		return units.Unlimited, nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: limit value %q", ErrMalformed, s)
	}
	return fromKernel(n), nil
}
