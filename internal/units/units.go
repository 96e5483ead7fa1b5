// Package units parses and formats the byte sizes ncclrun's flags and
// messages use: "65536", "64KiB", "8MiB", "1GiB", "64k", "unlimited".
package units

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Unlimited is the value ParseSize returns for "unlimited", "infinity" and
// "-1" (RLIM_INFINITY).
const Unlimited int64 = -1

// ErrBadSize is wrapped by every error ParseSize returns.
var ErrBadSize = errors.New("bad size")

var suffixes = []struct {
	s string
	m int64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40},
	{"kb", 1 << 10}, {"mb", 1 << 20}, {"gb", 1 << 30}, {"tb", 1 << 40},
	{"ki", 1 << 10}, {"mi", 1 << 20}, {"gi", 1 << 30}, {"ti", 1 << 40},
	{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}, {"t", 1 << 40},
	{"b", 1},
}

// ParseSize parses a size in bytes. Suffixes are binary whatever their
// spelling (64k = 64KiB = 65536), as ulimit and docker's --ulimit read them.
// "unlimited", "infinity" and "-1" give Unlimited.
func ParseSize(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	switch t {
	case "":
		return 0, fmt.Errorf("%w: empty", ErrBadSize)
	case "unlimited", "infinity", "-1":
		return Unlimited, nil
	}
	return parseBytes(s, t, "65536, 64KiB, 8MiB, 1GiB or unlimited")
}

// ParseFiniteSize is ParseSize for a size that must be a number of bytes:
// "unlimited" and its spellings are an error, and the error's examples do
// not offer them.
func ParseFiniteSize(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	switch t {
	case "":
		return 0, fmt.Errorf("%w: empty", ErrBadSize)
	case "unlimited", "infinity", "-1":
		return 0, fmt.Errorf("%w: must be a number of bytes, not %s", ErrBadSize, t)
	}
	return parseBytes(s, t, "65536, 64KiB, 8MiB or 1GiB")
}

// parseBytes parses t, s lowered and trimmed, as a number of bytes with
// an optional suffix; examples are the error's.
func parseBytes(s, t, examples string) (int64, error) {
	mult := int64(1)
	for _, suf := range suffixes {
		if strings.HasSuffix(t, suf.s) {
			mult = suf.m
			t = strings.TrimSpace(strings.TrimSuffix(t, suf.s))
			break
		}
	}
	n, err := strconv.ParseUint(t, 10, 63)
	if err != nil {
		return 0, fmt.Errorf("%w: %q (want e.g. %s)", ErrBadSize, s, examples)
	}
	if n > uint64(math.MaxInt64/mult) {
		return 0, fmt.Errorf("%w: %q is too large", ErrBadSize, s)
	}
	return int64(n) * mult, nil
}

// FormatSize renders bytes the way ncclrun's messages do: "64 KiB",
// "8 MiB", "1.5 GiB", "unlimited" for Unlimited (any negative value).
func FormatSize(n int64) string {
	if n < 0 {
		return "unlimited"
	}
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	f := float64(n)
	i := 0
	for f >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%d B", n)
	}
	if f == math.Trunc(f) {
		return fmt.Sprintf("%.0f %s", f, units[i])
	}
	return fmt.Sprintf("%.1f %s", f, units[i])
}
