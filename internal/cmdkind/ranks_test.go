package cmdkind

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRanks(t *testing.T) {
	tests := []struct {
		cmd  string
		n    int
		from string
	}{
		{"torchrun --nproc-per-node 8 train.py", 8, "--nproc-per-node 8"},
		{"torchrun --nnodes 2 --nproc_per_node=4 train.py", 4, "--nproc_per_node=4"},
		{"/usr/bin/torchrun --standalone --nproc_per_node 2 train.py", 2, "--nproc_per_node 2"},
		{"python3 -m torch.distributed.run --nproc-per-node 2 train.py", 2, "--nproc-per-node 2"},
		{"python -mtorch.distributed.run --nproc_per_node 8 t.py", 8, "--nproc_per_node 8"},
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
			n, from := Command{Path: f[0], Args: f[1:]}.Ranks()
			assert.Equal(t, tt.n, n)
			assert.Equal(t, tt.from, from)
		})
	}
}

// TestSizeOf: the first launcher a command line names gives the job's
// size and the arguments that said so; a program's own options do not.
func TestSizeOf(t *testing.T) {
	tests := []struct {
		cmd  string
		want Size
	}{
		{"torchrun --nnodes 2 --nproc_per_node=4 train.py --nnodes 9", Size{World: 8, PerNode: 4, PerNodeArg: "--nproc_per_node=4"}},
		{"torchrun --nnodes 1:4 --nproc-per-node 8 t.py", Size{PerNode: 8, PerNodeArg: "--nproc-per-node 8"}},
		{"env A=1 srun --ntasks=32 -l --ntasks-per-node 8 python t.py", Size{World: 32, PerNode: 8, WorldArg: "--ntasks=32", PerNodeArg: "--ntasks-per-node 8"}},
		{"mpirun -np 16 -npernode 8 python t.py -n 3", Size{World: 16, PerNode: 8, WorldArg: "-np 16", PerNodeArg: "-npernode 8"}},
		{"mpirun --allow-run-as-root ./a.out -np 3", Size{}},
		{"mpirun --mca pml ucx -x NCCL_DEBUG -np 8 python t.py", Size{World: 8, WorldArg: "-np 8"}},
		{"mpiexec.hydra -genv FI_PROVIDER tcp -n 4 -ppn 2 ./a.out", Size{World: 4, PerNode: 2, WorldArg: "-n 4", PerNodeArg: "-ppn 2"}},
		{"python -mtorch.distributed.run --nproc_per_node 8 t.py", Size{PerNode: 8, PerNodeArg: "--nproc_per_node 8"}},
		{"python train.py --nproc-per-node 8", Size{}},
	}
	for _, tt := range tests {
		t.Run(tt.cmd, func(t *testing.T) {
			assert.Equal(t, tt.want, SizeOf(strings.Fields(tt.cmd)))
		})
	}
}
