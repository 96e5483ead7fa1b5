package rlimit

import (
	"math"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ncclrun/ncclrun/internal/units"
)

func TestKernelValues(t *testing.T) {
	for _, tc := range []struct {
		kernel uint64
		want   int64
	}{
		{0, 0}, {65536, 65536}, {math.MaxInt64, math.MaxInt64},
		{1 << 63, units.Unlimited}, {math.MaxUint64, units.Unlimited},
	} {
		assert.Equal(t, tc.want, fromKernel(tc.kernel), "%d", tc.kernel)
	}
	assert.Equal(t, uint64(math.MaxUint64), toKernel(units.Unlimited))
	assert.Equal(t, uint64(math.MaxUint64), toKernel(-7))
	assert.Equal(t, uint64(8<<20), toKernel(8<<20))
	assert.Equal(t, units.Unlimited, fromKernel(toKernel(units.Unlimited)))
}

func TestParseProc(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"unlimited", units.Unlimited, true},
		{"65536", 65536, true},
		{"18446744073709551615", units.Unlimited, true},
		{"9223372036854775808", units.Unlimited, true},
		{"lots", 0, false},
		{"-1", 0, false},
		{"", 0, false},
	} {
		v, err := ParseProc(tc.in)
		if !tc.ok {
			assert.ErrorIs(t, err, ErrMalformed, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.want, v, tc.in)
	}
}

// TestGetSet sets the memlock limit it read, which any process may.
func TestGetSet(t *testing.T) {
	l, err := Get(Memlock)
	if runtime.GOOS != "linux" {
		assert.ErrorIs(t, err, ErrUnsupported)
		return
	}
	require.NoError(t, err)
	require.NoError(t, Set(Memlock, l))
	l2, err := Get(Memlock)
	require.NoError(t, err)
	assert.Equal(t, l, l2)
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Limit
		bad  string
	}{
		{in: "64KiB", want: Limit{Soft: 64 << 10, Hard: 64 << 10}},
		{in: "8MiB:unlimited", want: Limit{Soft: 8 << 20, Hard: units.Unlimited}},
		{in: "unlimited", want: Limit{Soft: units.Unlimited, Hard: units.Unlimited}},
		{in: "1GiB:64KiB", bad: "soft limit 1 GiB is above hard limit 64 KiB"},
		{in: "unlimited:1GiB", bad: "above hard limit"},
		{in: "lots", bad: "lots"},
	} {
		got, err := Parse(tc.in)
		if tc.bad != "" {
			assert.ErrorContains(t, err, tc.bad, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.want, got, tc.in)
	}
}

// String is SOFT:HARD, exact, and Parse reads it back.
func TestString(t *testing.T) {
	for _, tc := range []struct {
		l    Limit
		want string
	}{
		{Limit{65536, 65536}, "64KiB:64KiB"},
		{Limit{65536, 8 << 20}, "64KiB:8MiB"},
		{Limit{100000, Unlimited}, "100000:unlimited"},
		{Limit{Unlimited, Unlimited}, "unlimited:unlimited"},
		{Limit{0, 1536}, "0:1536"},
		{Limit{3 << 40, 3 << 40}, "3TiB:3TiB"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.l.String())
			back, err := Parse(tc.l.String())
			require.NoError(t, err)
			assert.Equal(t, tc.l, back)
		})
	}
}

// Above orders limit values as setrlimit(2) does, infinity the largest;
// every negative value is infinity (IsUnlimited).
func TestAbove(t *testing.T) {
	for _, tc := range []struct {
		a, b int64
		want bool
	}{
		{2, 1, true}, {1, 2, false}, {1, 1, false},
		{Unlimited, 1 << 40, true}, {1 << 40, Unlimited, false},
		{Unlimited, Unlimited, false}, {-2, Unlimited, false}, {-2, 0, true},
		{0, 0, false},
	} {
		assert.Equal(t, tc.want, Above(tc.a, tc.b), "Above(%d, %d)", tc.a, tc.b)
	}
	assert.True(t, IsUnlimited(Unlimited))
	assert.True(t, IsUnlimited(-2))
	assert.False(t, IsUnlimited(0))
}
