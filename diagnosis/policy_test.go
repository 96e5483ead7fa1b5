package diagnosis

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestMisconfigIDsInCatalog: every id of misconfigIDs is a diagnosis the
// shipped catalog has, and none of the causes a retry may not meet again.
func TestMisconfigIDsInCatalog(t *testing.T) {
	for _, id := range misconfigIDs {
		_, ok := DefaultCatalog().Entry(id)
		assert.True(t, ok, "%s is not in the catalog", id)
	}
	for _, id := range []string{"ib-transport", "peer-lost", "collective-timeout", "cuda-oom", Degraded} {
		assert.NotContains(t, misconfigIDs, id)
	}
}
