package main

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/ncclrun/ncclrun/internal/cmdkind"
	"github.com/ncclrun/ncclrun/preflight"
)

// TestDebugFileWithoutPidUnderRun: run's preflight warns about an
// NCCL_DEBUG_FILE without %p when CMD itself starts several ranks, with
// no WORLD_SIZE in the environment and no GPU on the machine.
func TestDebugFileWithoutPidUnderRun(t *testing.T) {
	tests := []struct {
		cmd  string
		warn bool
	}{
		{"torchrun --nproc-per-node 2 train.py", true},
		{"mpirun -np 2 python train.py", true},
		{"torchrun --nproc-per-node 1 train.py", false},
		{"python train.py", false},
	}
	for _, tt := range tests {
		t.Run(tt.cmd, func(t *testing.T) {
			f := strings.Fields(tt.cmd)
			opts := preflight.Options{Root: "../../preflight/testdata/vm-root", Env: []string{"NCCL_DEBUG_FILE=/tmp/nccl.log"}}
			opts.Ranks, opts.RanksFrom = cmdkind.Command{Path: f[0], Args: f[1:]}.Ranks()
			r := preflight.Run(context.Background(), opts)
			var sum string
			for _, c := range r.Checks {
				if c.ID == preflight.IDEnvSanity {
					sum = c.Summary
				}
			}
			if tt.warn {
				assert.Contains(t, sum, "NCCL_DEBUG_FILE=\"/tmp/nccl.log\" has no %p")
				assert.Contains(t, sum, "CMD starts several ranks")
			} else {
				assert.NotContains(t, sum, "has no %p")
			}
		})
	}
}
