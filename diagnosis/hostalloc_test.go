package diagnosis

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHostAllocIsNotGPUMemory: NCCL's cudaHostAlloc failure is still
// cuda-oom, but its title and cause speak of host memory; the device
// allocations keep the entry's GPU wording.
func TestHostAllocIsNotGPUMemory(t *testing.T) {
	tests := []struct {
		name, log string
		host      bool
	}{
		{"host alloc", "node-4:2210:2290 [1] include/alloc.h:159 NCCL WARN Failed to CUDA host alloc 1048576 bytes\nnode-4:2210:2290 [1] NCCL INFO init.cc:412 -> 1\n", true},
		{"device calloc", "node-4:2210:2290 [1] include/alloc.h:185 NCCL WARN Failed to CUDA calloc 6291456 bytes\n", false},
		{"device malloc", "node-4:2210:2290 [1] include/alloc.h:462 NCCL WARN Failed to CUDA malloc 33554432 bytes\n", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ds, err := Explain(strings.NewReader(tc.log), Facts{})
			require.NoError(t, err)
			require.NotEmpty(t, ds)
			assert.Equal(t, "cuda-oom", ds[0].ID)
			assert.Equal(t, tc.host, strings.Contains(ds[0].Title, "Host"), ds[0].Title)
			assert.Equal(t, tc.host, strings.Contains(ds[0].Cause, "host's RAM"), ds[0].Cause)
		})
	}
}
