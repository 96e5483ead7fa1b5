package diagnosis

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMemlockCauseNamesWhatRunSaw: with run's facts the memlock cause is one
// sentence naming the limit and capability state; without them (explain)
// it is the catalog's general explanation.
func TestMemlockCauseNamesWhatRunSaw(t *testing.T) {
	line := []byte("n1:7:7 [0] misc/ibvwrap.cc:169 NCCL WARN Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory")
	seen := "RLIMIT_MEMLOCK 64 KiB (soft=hard), uid 1000, CAP_IPC_LOCK not effective"

	m := NewMatcher(Facts{Known: true, Seen: seen, MemlockFix: "raise it"})
	m.Feed(line)
	ds := m.Diagnoses()
	require.NotEmpty(t, ds)
	assert.Equal(t, "memlock", ds[0].ID)
	assert.Equal(t, "NCCL could not pin memory for the network card: the command ran with "+seen+", so the kernel refused to lock more.", ds[0].Cause)
	assert.Equal(t, "raise it", ds[0].Fix)
	assert.Equal(t, Certain, ds[0].Certainty)

	m = NewMatcher(Facts{})
	m.Feed(line)
	ds = m.Diagnoses()
	require.NotEmpty(t, ds)
	assert.Equal(t, "memlock", ds[0].ID)
	assert.NotContains(t, ds[0].Cause, seen)
	assert.Equal(t, Likely, ds[0].Certainty)
}
