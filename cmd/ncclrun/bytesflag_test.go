package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBytesFlags: --probe and --min-memlock take a number of bytes; a bad
// value is a usage error whose examples are values the flag accepts (not
// "unlimited", which --memlock takes and these refuse).
func TestBytesFlags(t *testing.T) {
	root := fakeTree(t, 0, "unlimited", "unlimited", "00000000a80425fb")
	for _, flag := range []string{"--probe", "--min-memlock"} {
		for _, tc := range []struct {
			value string
			want  string
		}{
			{"abc", `bad size: "abc" (want e.g. 65536, 64KiB, 8MiB or 1GiB)`},
			{"unlimited", "bad size: must be a number of bytes, not unlimited"},
			{"-1", "bad size: must be a number of bytes, not -1"},
			{"Infinity", "bad size: must be a number of bytes, not infinity"},
		} {
			t.Run(flag+"="+tc.value, func(t *testing.T) {
				r := ncclrun(t, "doctor", "--root", root, flag, tc.value)
				requireUsage(t, r, flag+": "+tc.want)
				assert.NotContains(t, r.stderr, "or unlimited")
			})
		}
	}
	r := ncclrun(t, "doctor", "--root", root, "--min-memlock", "64KiB")
	require.NotEqual(t, 2, r.code, r.stderr)
	r = ncclrun(t, "doctor", "--root", root, "--memlock", "abc")
	requireUsage(t, r, "or unlimited)")
}
