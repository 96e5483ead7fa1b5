package rlimit

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ncclrun/ncclrun/internal/units"
)

const mib8 = 8 << 20

var inf = units.Unlimited

func TestRaised(t *testing.T) {
	for _, tc := range []struct {
		name      string
		before    Limit
		permitted bool
		want      Limit
	}{
		{"soft=hard finite, permitted", Limit{mib8, mib8}, true, Limit{inf, inf}},
		{"soft=hard finite, refused", Limit{mib8, mib8}, false, Limit{mib8, mib8}},
		{"soft below finite hard, permitted", Limit{65536, mib8}, true, Limit{inf, inf}},
		{"soft below finite hard, refused", Limit{65536, mib8}, false, Limit{mib8, mib8}},
		{"hard unlimited needs no permission", Limit{65536, inf}, false, Limit{inf, inf}},
		{"unlimited stays", Limit{inf, inf}, false, Limit{inf, inf}},
		{"zero, refused", Limit{0, 0}, false, Limit{0, 0}},
		{"zero, permitted", Limit{0, 0}, true, Limit{inf, inf}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Raised(tc.before, tc.permitted))
		})
	}
}

func TestHardRaisePermitted(t *testing.T) {
	assert.True(t, HardRaisePermitted(true, true))
	assert.False(t, HardRaisePermitted(true, false), "CAP_SYS_RESOURCE in a user namespace")
	assert.False(t, HardRaisePermitted(false, true))
	assert.False(t, HardRaisePermitted(false, false))
}

// TestRaiseSteps checks the steps Raise asks for and what a refusal leaves.
func TestRaiseSteps(t *testing.T) {
	refuse := errors.New("refused")
	for _, tc := range []struct {
		name    string
		before  Limit
		fail    int // the step set refuses (1-based), 0: none
		steps   []Limit
		after   Limit
		hardErr bool
		err     bool
	}{
		{"both steps", Limit{65536, mib8}, 0, []Limit{{mib8, mib8}, {inf, inf}}, Limit{inf, inf}, false, false},
		{"hard refused", Limit{65536, mib8}, 2, []Limit{{mib8, mib8}, {inf, inf}}, Limit{mib8, mib8}, true, false},
		{"soft refused", Limit{65536, mib8}, 1, []Limit{{mib8, mib8}}, Limit{65536, mib8}, false, true},
		{"soft=hard: one step", Limit{mib8, mib8}, 0, []Limit{{inf, inf}}, Limit{inf, inf}, false, false},
		{"hard unlimited: one step", Limit{65536, inf}, 0, []Limit{{inf, inf}}, Limit{inf, inf}, false, false},
		{"unlimited: none", Limit{inf, inf}, 0, nil, Limit{inf, inf}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var steps []Limit
			after, hardErr, err := Raise(tc.before, func(l Limit) error {
				steps = append(steps, l)
				if len(steps) == tc.fail {
					return refuse
				}
				return nil
			})
			assert.Equal(t, tc.steps, steps)
			assert.Equal(t, tc.after, after)
			assert.Equal(t, tc.hardErr, hardErr != nil, "hardErr %v", hardErr)
			assert.Equal(t, tc.err, err != nil, "err %v", err)
			if hardErr != nil {
				assert.ErrorIs(t, hardErr, refuse)
			}
			if err != nil {
				assert.ErrorIs(t, err, refuse)
			}
		})
	}
}

// TestRaiseMatchesKernel checks the prediction against the kernel: Raise
// on this process (its soft limit lowered first, which any process may)
// must leave what Raised predicts from this process's own capability and
// user namespace as /proc shows them. As root it takes the permitted
// branch; as a user, or in a user namespace, the refused one.
func TestRaiseMatchesKernel(t *testing.T) {
	orig, err := Get(Memlock)
	if errors.Is(err, ErrUnsupported) {
		t.Skip("no Linux resource limits")
	}
	require.NoError(t, err)
	t.Cleanup(func() { _ = Set(Memlock, orig) })
	permitted, ok := selfMayRaiseHard(t)
	if !ok {
		t.Skip("this process's capabilities or user namespace cannot be read")
	}
	// Lower the hard limit only where the kernel lets it be raised back
	// (the Cleanup restores it), so that the hard step is taken.
	before := Limit{Soft: 0, Hard: orig.Hard}
	if permitted {
		before.Hard = mib8
	}
	require.NoError(t, Set(Memlock, before))
	after, hardErr, err := Raise(before, func(l Limit) error { return Set(Memlock, l) })
	require.NoError(t, err)
	got, err := Get(Memlock)
	require.NoError(t, err)
	assert.Equal(t, got, after)
	assert.Equal(t, Raised(before, permitted), got, "CAP_SYS_RESOURCE in the initial user namespace: %v; hard raise: %v", permitted, hardErr)
}
