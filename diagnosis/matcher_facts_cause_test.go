package diagnosis

import (
	"strings"
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

// TestKnockOnSaysWhatItFollows: a watchdog timeout after a memlock WARN is
// ranked second and says it most likely follows from the memlock failure.
func TestKnockOnSaysWhatItFollows(t *testing.T) {
	m := NewMatcher(Facts{})
	m.Feed([]byte("n1:7:7 [0] misc/ibvwrap.cc:169 NCCL WARN Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory"))
	m.Feed([]byte("[rank0]:[E1205 04:35:53.584483882 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600123 milliseconds before timing out."))
	ds := m.Diagnoses()
	require.Len(t, ds, 2)
	assert.Equal(t, "memlock", ds[0].ID)
	assert.Equal(t, "collective-timeout", ds[1].ID)
	assert.True(t, strings.HasPrefix(ds[1].Cause, "Seen after the memlock failure above"), ds[1].Cause)

	m = NewMatcher(Facts{})
	m.Feed([]byte("[rank0]:[E1205 04:35:53.584483882 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600123 milliseconds before timing out."))
	ds = m.Diagnoses()
	require.Len(t, ds, 1)
	assert.False(t, strings.HasPrefix(ds[0].Cause, "Seen after"), "alone it is its own cause")
}
