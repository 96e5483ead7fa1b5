// Package rlimit reads and sets this process's resource limits with the
// one convention ncclrun uses for them: int64 bytes, units.Unlimited (-1) for
// RLIM_INFINITY. Every conversion from the kernel's unsigned value goes
// through one function (fromKernel), so "infinity" is decided by one test.
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

// Limit is a soft/hard pair; units.Unlimited (-1) means RLIM_INFINITY. The
// zero value is a limit of 0 bytes.
type Limit struct {
	Soft, Hard int64
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
	if v < 0 {
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
		if hv != units.Unlimited && (sv == units.Unlimited || sv > hv) {
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
