package preflight

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMemlockPlanRefused: --memlock with a hard limit above ncclrun's own
// (after its raise) needs CAP_SYS_RESOURCE in the initial user namespace;
// without it setrlimit(2) refuses and run does not start CMD (exit 125),
// so capabilities fails and says so, where it used to pass.
func TestMemlockPlanRefused(t *testing.T) {
	cases := []struct {
		name, tree string
		want       Rlimit
		status     Status
		summary    string
	}{
		{"docker root, no CAP_SYS_RESOURCE, above 64 KiB", "testdata/docker-root", Rlimit{Soft: 1 << 20, Hard: 1 << 20}, Fail, "needs CAP_SYS_RESOURCE, and ncclrun does not hold it effective"},
		{"docker root, unlimited asked", "testdata/docker-root", Rlimit{Soft: Unlimited, Hard: Unlimited}, Fail, "hard RLIMIT_MEMLOCK of unlimited"},
		{"docker root, at its own hard limit", "testdata/docker-root", Rlimit{Soft: 65536, Hard: 65536}, Warn, ""},
		{"user namespace: CAP_SYS_RESOURCE does not count", "testdata/userns", Rlimit{Soft: 16 << 20, Hard: 16 << 20}, Fail, "in the initial user namespace, and ncclrun runs in another"},
		{"CAP_SYS_RESOURCE in the initial namespace: the raise makes it unlimited", "testdata/vm-root", Rlimit{Soft: 16 << 20, Hard: 16 << 20}, OK, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.want
			r := Run(context.Background(), Options{Root: tc.tree, Env: []string{}, Plan: Plan{Memlock: &want}})
			c, ok := r.Check(IDCapabilities)
			require.True(t, ok)
			if tc.status == Fail {
				assert.Equal(t, Fail, c.Status, c.Summary)
				assert.Contains(t, c.Summary, tc.summary)
				assert.Contains(t, c.Summary, "will not start CMD (exit 125)")
				assert.Contains(t, c.Fix, "--memlock")
				return
			}
			assert.Equal(t, tc.status, c.Status, c.Summary)
			assert.NotContains(t, c.Summary, "--memlock")
		})
	}
}
