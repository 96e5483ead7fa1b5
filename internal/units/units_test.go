package units

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"65536", 65536}, {"64KiB", 65536}, {"64k", 65536}, {"64K", 65536}, {"64kb", 65536},
		{"8MiB", 8 << 20}, {"8m", 8 << 20}, {"1GiB", 1 << 30}, {"1g", 1 << 30}, {"2 GiB", 2 << 30},
		{"unlimited", Unlimited}, {"infinity", Unlimited}, {"-1", Unlimited}, {"0", 0}, {"12b", 12},
	} {
		got, err := ParseSize(tc.in)
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.want, got, tc.in)
	}
	for _, bad := range []string{"", "abc", "-2", "1.5GiB", "64XB", "99999999999999999999", "9999999999TiB", "k"} {
		_, err := ParseSize(bad)
		assert.ErrorIs(t, err, ErrBadSize, bad)
	}
}

func TestParseFiniteSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{{"65536", 65536}, {"64KiB", 65536}, {"8m", 8 << 20}, {"0", 0}} {
		got, err := ParseFiniteSize(tc.in)
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.want, got, tc.in)
	}
	for _, tc := range []struct{ in, msg string }{
		{"unlimited", "not unlimited"}, {"Infinity", "not infinity"}, {" -1 ", "not -1"},
		{"abc", "(want e.g. 65536, 64KiB, 8MiB or 1GiB)"}, {"", "empty"}, {"9999999999TiB", "too large"},
	} {
		_, err := ParseFiniteSize(tc.in)
		require.ErrorIs(t, err, ErrBadSize, tc.in)
		assert.Contains(t, err.Error(), tc.msg, tc.in)
		assert.NotContains(t, err.Error(), "or unlimited", tc.in)
	}
}

func TestFormatSize(t *testing.T) {
	for _, tc := range []struct {
		in   int64
		want string
	}{
		{65536, "64 KiB"}, {8 << 20, "8 MiB"}, {3 << 29, "1.5 GiB"}, {-1, "unlimited"}, {100, "100 B"},
	} {
		assert.Equal(t, tc.want, FormatSize(tc.in))
	}
}

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"64KiB", "unlimited", "8m", "", "-1", "1e9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err == nil && n < -1 {
			t.Fatalf("ParseSize(%q) = %d", s, n)
		}
		_ = FormatSize(n)
	})
}
