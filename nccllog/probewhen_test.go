package nccllog

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ncclrun/ncclrun/internal/cmdkind"
	"github.com/ncclrun/ncclrun/preflight"
)

func TestProbeOff(t *testing.T) {
	pipe, w, err := os.Pipe()
	require.NoError(t, err)
	defer pipe.Close()
	defer w.Close()
	assert.True(t, StdoutFile(w))
	assert.False(t, StdoutFile(&bytes.Buffer{}))
	devs := []preflight.RDMADevice{{Name: "mlx5_0", UverbsPresent: true, Ports: []preflight.RDMAPort{{Port: 1, State: "ACTIVE"}}}}
	usable := preflight.Result{ID: preflight.IDRDMA, Status: preflight.OK, Details: map[string]any{"devices": devs}}
	gpu := preflight.Result{ID: preflight.IDGPU, Status: preflight.OK}
	on := preflight.Report{Checks: []preflight.Result{usable, gpu}, Facts: preflight.Facts{RDMA: devs}}
	tests := []struct {
		name  string
		env   []string
		conf  map[string]string
		rep   preflight.Report
		path  string
		out   bool
		wants string // "" = on
	}{
		{"on", nil, nil, on, "/usr/bin/torchrun", true, ""},
		{"user's subsys", []string{"NCCL_DEBUG_SUBSYS=INIT"}, nil, on, "python3", true, "NCCL_DEBUG_SUBSYS is set"},
		{"user's file", []string{"NCCL_DEBUG_FILE=/tmp/x.%p"}, nil, on, "python3", true, "NCCL_DEBUG_FILE is set"},
		{"file in nccl.conf", nil, map[string]string{"NCCL_DEBUG_FILE": "/tmp/x"}, on, "python3", true, "config file"},
		{"user's NCCL_DEBUG=WARN is theirs", []string{"NCCL_DEBUG=WARN"}, nil, on, "python3", true, "NCCL_DEBUG is set"},
		{"NCCL_DEBUG in nccl.conf", nil, map[string]string{"NCCL_DEBUG": "WARN"}, on, "python3", true, "NCCL_DEBUG is set in NCCL's config file"},
		{"mpirun", nil, nil, on, "/usr/bin/mpirun", true, "mpirun starts ranks on other hosts"},
		{"srun", nil, nil, on, "srun", true, "srun starts ranks"},
		{"stdout not a file", nil, nil, on, "python3", false, "stdout"},
		{"no GPU", nil, nil, preflight.Report{Checks: []preflight.Result{usable}}, "python3", true, "no GPU"},
		{"no usable port", nil, nil, preflight.Report{Checks: []preflight.Result{gpu}}, "python3", true, "no usable RDMA port"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			why := ProbeOff(tt.env, tt.conf, cmdkind.Command{Path: tt.path}, tt.out, tt.rep)
			if tt.wants == "" {
				assert.Empty(t, why)
			} else {
				assert.Contains(t, why, tt.wants)
			}
		})
	}
	// A launch script's mpirun starts remote ranks as mpirun itself does:
	// the env forwarding would hand them the private NCCL_DEBUG_FILE.
	script := cmdkind.Command{Path: "bash", Args: []string{"-c", "mpirun --host a,b -np 2 python train.py"}}
	assert.Equal(t, "mpirun starts ranks on other hosts", ProbeOff(nil, nil, script, true, on))
}

// TestProbeEnv: the probe sends NCCL's INIT and NET INFO lines to a file
// per process in its private directory.
func TestProbeEnv(t *testing.T) {
	p, err := NewProbe(&bytes.Buffer{}, -1, -1)
	require.NoError(t, err)
	defer p.Remove()
	vars := p.Env()
	require.Len(t, vars, 3)
	assert.Equal(t, []string{"NCCL_DEBUG=INFO", "NCCL_DEBUG_SUBSYS=INIT,NET", "NCCL_DEBUG_FILE=" + filepath.Join(p.Dir, "nccl.%h.%p")},
		[]string{vars[0].Name + "=" + vars[0].Value, vars[1].Name + "=" + vars[1].Value, vars[2].Name + "=" + vars[2].Value})
}
