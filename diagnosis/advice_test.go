package diagnosis

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ncclrun/ncclrun/internal/advice"
)

// TestCatalogFixesFromAdvice: the memlock and shm fixes are preflight's
// texts for every platform (internal/advice), not a second copy that can
// drift (as Slurm's PropagateResourceLimits vs
// PropagateResourceLimitsExcept=MEMLOCK).
func TestCatalogFixesFromAdvice(t *testing.T) {
	c := DefaultCatalog()
	for id, fix := range map[string]advice.Fix{"memlock": advice.RaiseMemlock, "shm": advice.ShmSize} {
		e, ok := c.Entry(id)
		require.True(t, ok, id)
		for _, p := range advice.Platforms {
			assert.Contains(t, e.Fix, advice.Text(fix, p, advice.Who{Unknown: true}), "%s fix for %s", id, p)
		}
		assert.NotContains(t, e.Fix, "{advice:", "%s: placeholder left", id)
	}
	e, _ := c.Entry("memlock")
	assert.Contains(t, e.Fix, "PropagateResourceLimitsExcept=MEMLOCK")
	assert.NotContains(t, e.Fix, "PropagateResourceLimits;")
}

func TestCatalogUnknownAdvice(t *testing.T) {
	_, err := NewCatalog([]Entry{{ID: "x", Title: "t", Cause: "c", Fix: "do {advice:no-such-fix}",
		Patterns: []Pattern{{Re: "boom"}}}})
	require.ErrorIs(t, err, ErrCatalog)
	assert.Contains(t, err.Error(), `"no-such-fix"`)
}
