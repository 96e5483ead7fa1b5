package main

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/ncclrun/ncclrun/launcher"
	"github.com/ncclrun/ncclrun/preflight"
)

func TestCmdRanks(t *testing.T) {
	tests := []struct {
		cmd  string
		n    int
		from string
	}{
		{"torchrun --nproc-per-node 8 train.py", 8, "--nproc-per-node 8"},
		{"torchrun --nnodes 2 --nproc_per_node=4 train.py", 4, "--nproc_per_node=4"},
		{"/usr/bin/torchrun --standalone --nproc_per_node 2 train.py", 2, "--nproc_per_node 2"},
		{"python3 -m torch.distributed.run --nproc-per-node 2 train.py", 2, "--nproc-per-node 2"},
		{"torchrun --nproc-per-node gpu train.py", 0, ""},
		{"torchrun --nproc-per-node 1 train.py", 1, "--nproc-per-node 1"},
		{"torchrun train.py --nproc-per-node 8", 0, ""}, // the script's own argument
		{"mpirun -np 4 --bind-to none python train.py", 4, "-np 4"},
		{"mpirun.openmpi --oversubscribe -n 2 ./all_reduce_perf -g 1", 2, "-n 2"},
		{"mpiexec --np=16 ./a.out", 16, "--np=16"},
		{"mpirun -x NCCL_DEBUG ./a.out -np 3", 0, ""},
		{"python train.py --nproc-per-node 8", 0, ""},
		{"srun -n 8 python train.py", 0, ""},
		{"torchrun --nproc-per-node", 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.cmd, func(t *testing.T) {
			f := strings.Fields(tt.cmd)
			n, from := cmdRanks(launcher.Command{Path: f[0], Args: f[1:]})
			assert.Equal(t, tt.n, n)
			assert.Equal(t, tt.from, from)
		})
	}
}

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
			opts.Ranks, opts.RanksFrom = cmdRanks(launcher.Command{Path: f[0], Args: f[1:]})
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
