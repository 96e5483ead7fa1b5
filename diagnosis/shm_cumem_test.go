package diagnosis

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestShmUnnamedSegment: a failed attach to /dev/shm/nccl- of size 0 is
// ranks that disagree on cuMem host allocation (the peer passed a file
// descriptor, not a segment name), not a /dev/shm that is too small: it
// is no `shm` (the contract's "/dev/shm too small") but NCCL's error
// explained, whose text says cuMem and never tells the user to grow
// /dev/shm, with or without run's facts about its size, also when
// NCCL's plain `Call to open failed` WARN came first.
func TestShmUnnamedSegment(t *testing.T) {
	tests := []struct {
		name string
		log  string
	}{
		{"after the open WARN", "[2025-09-01 10:00:00] gpu7:2211:2290 [1] misc/shmutils.cc:93 NCCL WARN Call to open failed: No such file or directory\n" +
			"[2025-09-01 10:00:00] gpu7:2211:2290 [1] misc/shmutils.cc:128 NCCL WARN Error while attaching to shared memory segment /dev/shm/nccl- (size 0), error: No such file or directory (2)\n"},
		{"2.22+ with errno", "node-a:5100:5188 [3] misc/shmutils.cc:180 NCCL WARN Error while attaching to shared memory segment /dev/shm/nccl- (size 0), error: No such file or directory (2)\n" +
			"node-a:5100:5188 [3] NCCL INFO transport/shm.cc:399 -> 2\n"},
		{"2.30 location, no errno", "[2025-09-01 10:00:00] gpu7:2211:2290 [1] os/linux.cc:159 NCCL WARN Error while attaching to shared memory segment /dev/shm/nccl- (size 0)\n"},
	}
	for _, tt := range tests {
		for _, f := range []Facts{{}, {Known: true, MemlockAdequate: true, ShmBytes: 64 << 20}} {
			t.Run(tt.name, func(t *testing.T) {
				ds := explainString(t, tt.log, f)
				require.NotEmpty(t, ds)
				d := ds[0]
				assert.Equal(t, "nccl-error", d.ID)
				assert.Len(t, ds, 1, "%v", ids(ds))
				assert.Contains(t, d.Title, "cuMem")
				assert.Equal(t, Likely, d.Certainty)
				assert.Contains(t, d.Cause, "cuMem")
				assert.Contains(t, d.Fix, "NCCL_CUMEM_HOST_ENABLE")
				assert.Contains(t, d.How, "NCCL_CUMEM")
				for _, s := range []string{d.Title, d.Fix} {
					assert.NotContains(t, s, "shm-size")
					assert.NotContains(t, s, "bigger /dev/shm")
					assert.NotContains(t, s, "sizeLimit")
				}
			})
		}
	}
	// A named segment that is gone is still the shared-/dev/shm case.
	ds := explainString(t, "node-a:5100:5188 [3] misc/shmutils.cc:180 NCCL WARN Error while attaching to shared memory segment /dev/shm/nccl-3vQ1c2 (size 9637888), error: No such file or directory (2)\n", Facts{})
	require.NotEmpty(t, ds)
	assert.Equal(t, "shm", ds[0].ID)
	assert.NotContains(t, ds[0].Cause, "cuMem")
}
