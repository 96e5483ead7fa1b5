package preflight

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFactsAgreeWithDetails: on every testdata tree the typed facts other
// packages read say what the JSON details say (the details are their
// rendering; nothing outside preflight reads them back).
func TestFactsAgreeWithDetails(t *testing.T) {
	trees, err := filepath.Glob("testdata/*")
	require.NoError(t, err)
	n := 0
	for _, tree := range trees {
		if st, err := os.Stat(tree); err != nil || !st.IsDir() {
			continue
		}
		n++
		t.Run(filepath.Base(tree), func(t *testing.T) {
			r := Run(context.Background(), Options{Root: tree, Env: []string{}})
			f := r.Facts
			assert.Contains(t, []Platform{Kubernetes, Docker, Slurm, Host}, r.Environment.Kind)

			m, ok := r.Check(IDMemlock)
			require.True(t, ok)
			assert.Equal(t, m.Details["rule"], f.Memlock.Rule)
			assert.Equal(t, m.Fix, f.Memlock.Fix)

			sh, ok := r.Check(IDShm)
			require.True(t, ok)
			if size, ok := sh.Details["size_bytes"]; ok {
				assert.Equal(t, size, f.ShmBytes)
			} else {
				assert.Zero(t, f.ShmBytes)
			}

			rd, ok := r.Check(IDRDMA)
			require.True(t, ok)
			devs := rd.Details["devices"].([]RDMADevice)
			if len(devs) == 0 {
				assert.Empty(t, f.RDMA)
			} else {
				assert.Equal(t, devs, f.RDMA)
			}
			_, none := rd.Details["sysfs_devices"]
			assert.Equal(t, none, f.NoRDMA)

			g, ok := r.Check(IDGPUDirect)
			require.True(t, ok)
			if g.Status == Skip {
				assert.Nil(t, f.GPUDirect)
			} else {
				require.NotNil(t, f.GPUDirect)
				_, nv := g.Details["nv_mem"]
				_, nvnc := g.Details["nv_mem_nc"]
				_, pm := g.Details["nvidia_peermem"]
				assert.Equal(t, nv || nvnc, f.GPUDirect.NvMem)
				assert.Equal(t, pm, f.GPUDirect.NvidiaPeermem)
				assert.Equal(t, g.Details["dmabuf_kernel"], f.GPUDirect.DMABuf)
			}
		})
	}
	require.Greater(t, n, 5)
}
