package cmdkind

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ncclrun/ncclrun/internal/environ"
)

// TestForwardEnvX: -x NAME goes before the user's arguments of an Open MPI
// launcher, told apart by name, by what CMD's own PATH resolves it to, or
// by CMD's own OPAL_PREFIX.
func TestForwardEnvX(t *testing.T) {
	dir := t.TempDir()
	mk := func(p string) string {
		p = filepath.Join(dir, p)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755))
		return p
	}
	ompi := mk("ompi/bin/mpirun")
	mk("ompi/bin/ompi_info")
	mpich := mk("mpich/bin/mpirun")
	mk("mpich/bin/hydra_pmi_proxy")
	unknown := mk("unknown/bin/mpiexec")
	alt := mk("alt/bin/mpirun.openmpi")
	link := filepath.Join(dir, "alt/bin/mpirun")
	require.NoError(t, os.Symlink(alt, link))

	added := []environ.Var{{Name: "NCCL_DEBUG", Value: "WARN"}, {Name: "NCCL_IB_HCA", Value: "mlx5_0"}}
	user := []string{"-np", "16", "python", "train.py"}
	x := []string{"-x", "NCCL_DEBUG", "-x", "NCCL_IB_HCA"}
	tests := []struct {
		name  string
		path  string
		args  []string
		env   []string
		added []environ.Var
		want  []string
	}{
		{"open mpi by ompi_info", ompi, user, nil, added, append(x, user...)},
		{"mpich hydra unchanged", mpich, user, nil, added, user},
		{"undecided unchanged", unknown, user, nil, added, user},
		{"debian alternative symlink", link, user, nil, added, append(x, user...)},
		{"orterun by name", filepath.Join(dir, "nowhere/orterun"), user, nil, added, append(x, user...)},
		{"prterun by name", "prterun", user, nil, added, append(x, user...)},
		{"mpiexec.hydra by name", "mpiexec.hydra", user, nil, added, user},
		{"not an mpi launcher", "torchrun", user, nil, added, user},
		{"nothing added", ompi, user, nil, nil, user},
		{"user already passes -x", ompi, []string{"-x", "NCCL_DEBUG=INFO", "-np", "2", "a.out"}, nil, added,
			[]string{"-x", "NCCL_IB_HCA", "-x", "NCCL_DEBUG=INFO", "-np", "2", "a.out"}},
		{"a bare mpirun through CMD's PATH", "mpirun", user, []string{"PATH=" + filepath.Join(dir, "ompi/bin")}, added, append(x, user...)},
		{"a bare mpirun through CMD's PATH: mpich", "mpirun", user, []string{"PATH=" + filepath.Join(dir, "mpich/bin"), "OPAL_PREFIX=/opt/ompi"}, added, user},
		{"CMD's OPAL_PREFIX decides an undecided mpirun", unknown, user, []string{"OPAL_PREFIX=/opt/ompi"}, added, append(x, user...)},
		{"a Hydra sibling outweighs OPAL_PREFIX", mpich, user, []string{"OPAL_PREFIX=/opt/ompi"}, added, user},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args, env, got := Command{Path: tt.path, Args: tt.args, Env: tt.env}.ForwardEnv(tt.added)
			assert.Equal(t, tt.want, args)
			assert.Equal(t, tt.env, env)
			assert.Equal(t, tt.added, got)
		})
	}
	t.Run("ncclrun's own PATH and OPAL_PREFIX are not CMD's", func(t *testing.T) {
		t.Setenv("OPAL_PREFIX", "/opt/ompi")
		t.Setenv("PATH", filepath.Join(dir, "ompi/bin"))
		args, _, _ := Command{Path: "mpirun", Args: user, Env: []string{"PATH=/nonexistent"}}.ForwardEnv(added)
		assert.Equal(t, user, args)
		args, _, _ = Command{Path: unknown, Args: user}.ForwardEnv(added)
		assert.Equal(t, user, args)
	})
}

func TestTorchrun(t *testing.T) {
	for _, tc := range []struct {
		path string
		args []string
		want bool
	}{
		{"torchrun", nil, true},
		{"/opt/venv/bin/torchrun", []string{"train.py"}, true},
		{"python3", []string{"-m", "torch.distributed.run", "x.py"}, true},
		{"python", []string{"-u", "-m", "torch.distributed.launch"}, true},
		{"python3", []string{"-mtorch.distributed.run"}, true},
		{"python3", []string{"train.py", "-m", "torch.distributed.run"}, false},
		{"python3", []string{"-m", "pip"}, false},
		{"mpirun", []string{"torchrun"}, false},
	} {
		c := Command{Path: tc.path, Args: tc.args}
		assert.Equal(t, tc.want, c.Torchrun(), "%s %v", tc.path, tc.args)
		assert.Equal(t, tc.want, c.CheckpointChildren(), "%s %v", tc.path, tc.args)
	}
}

// TestRemote: a launcher of remote ranks is seen as CMD and inside a
// shell's -c script, the case where ForwardEnv sets Open MPI's list.
func TestRemote(t *testing.T) {
	for _, tc := range []struct {
		path string
		args []string
		want string
	}{
		{"/usr/bin/mpirun", nil, "mpirun"},
		{"mpiexec.hydra", nil, "mpiexec.hydra"},
		{"srun", nil, "srun"},
		{"ssh", nil, "ssh"},
		{"deepspeed", nil, "deepspeed"},
		{"/usr/bin/mpirun.openmpi", nil, "mpirun.openmpi"},
		{"mpiexec", nil, "mpiexec"},
		{"orterun", nil, "orterun"},
		{"torchrun", nil, ""},
		{"python3", []string{"-c", "mpirun"}, ""},
		{"bash", []string{"-c", "mpirun --host a,b -np 2 python train.py"}, "mpirun"},
		{"/bin/sh", []string{"-ec", "cd /x; exec /opt/ompi/bin/orterun a.out"}, "orterun"},
		{"sh", []string{"-c", `exec "$@"`, "sh", "srun", "a.out"}, "srun"},
		{"sh", []string{"-c", "python train.py"}, ""},
		{"sh", []string{"launch.sh"}, ""},
	} {
		assert.Equal(t, tc.want, Command{Path: tc.path, Args: tc.args}.Remote(), "%s %v", tc.path, tc.args)
	}
}
