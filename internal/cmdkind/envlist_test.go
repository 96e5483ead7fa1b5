package cmdkind

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/ncclrun/ncclrun/internal/environ"
)

func TestWithOpenMPIEnvList(t *testing.T) {
	debug := environ.Var{Name: "NCCL_DEBUG", Value: "WARN"}
	hca := environ.Var{Name: "NCCL_IB_HCA", Value: "=mlx5_0"}
	tests := []struct {
		name     string
		env      []string
		added    []environ.Var
		wantEnv  []string
		wantList string // "": no OMPI_MCA_mca_base_env_list added
	}{
		{"nothing added", []string{"PATH=/bin"}, nil, []string{"PATH=/bin"}, ""},
		{"names joined by ';', env sorted", []string{"A=1", "NCCL_DEBUG=WARN", "NCCL_IB_HCA==mlx5_0", "PATH=/bin"}, []environ.Var{debug, hca},
			[]string{"A=1", "NCCL_DEBUG=WARN", "NCCL_IB_HCA==mlx5_0", "OMPI_MCA_mca_base_env_list=NCCL_DEBUG;NCCL_IB_HCA", "PATH=/bin"},
			"NCCL_DEBUG;NCCL_IB_HCA"},
		{"the user's list is extended", []string{"NCCL_DEBUG=WARN", "OMPI_MCA_mca_base_env_list=FOO;BAR=1"}, []environ.Var{debug},
			[]string{"NCCL_DEBUG=WARN", "OMPI_MCA_mca_base_env_list=FOO;BAR=1;NCCL_DEBUG"}, "FOO;BAR=1;NCCL_DEBUG"},
		{"the user's list ending in the delimiter: no empty entry", []string{"NCCL_DEBUG=WARN", "OMPI_MCA_mca_base_env_list=FOO;"}, []environ.Var{debug},
			[]string{"NCCL_DEBUG=WARN", "OMPI_MCA_mca_base_env_list=FOO;NCCL_DEBUG"}, "FOO;NCCL_DEBUG"},
		{"a name the user lists is not repeated", []string{"NCCL_DEBUG=WARN", "OMPI_MCA_mca_base_env_list=NCCL_DEBUG=INFO"}, []environ.Var{debug},
			[]string{"NCCL_DEBUG=WARN", "OMPI_MCA_mca_base_env_list=NCCL_DEBUG=INFO"}, ""},
		{"the user's delimiter", []string{"NCCL_DEBUG=WARN", "OMPI_MCA_mca_base_env_list=FOO", "OMPI_MCA_mca_base_env_list_delimiter=,"}, []environ.Var{debug},
			[]string{"NCCL_DEBUG=WARN", "OMPI_MCA_mca_base_env_list=FOO,NCCL_DEBUG", "OMPI_MCA_mca_base_env_list_delimiter=,"}, "FOO,NCCL_DEBUG"},
		{"a delimiter Open MPI refuses: left alone", []string{"NCCL_DEBUG=WARN", "OMPI_MCA_mca_base_env_list_delimiter=;;"}, []environ.Var{debug},
			[]string{"NCCL_DEBUG=WARN", "OMPI_MCA_mca_base_env_list_delimiter=;;"}, ""},
		{"an empty user list is replaced", []string{"NCCL_DEBUG=WARN", "OMPI_MCA_mca_base_env_list="}, []environ.Var{debug},
			[]string{"NCCL_DEBUG=WARN", "OMPI_MCA_mca_base_env_list=NCCL_DEBUG"}, "NCCL_DEBUG"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := append([]string(nil), tt.env...)
			added := append([]environ.Var(nil), tt.added...)
			gotEnv, gotAdded := withOpenMPIEnvList(env, added)
			assert.Equal(t, tt.wantEnv, gotEnv)
			assert.Equal(t, tt.env, env, "the caller's slice is not changed")
			if tt.wantList == "" {
				assert.Equal(t, added, gotAdded)
				return
			}
			if assert.Len(t, gotAdded, len(added)+1) {
				last := gotAdded[len(gotAdded)-1]
				assert.Equal(t, OpenMPIEnvList, last.Name)
				assert.Equal(t, tt.wantList, last.Value)
				assert.NotEmpty(t, last.Reason)
			}
		})
	}
}

func TestForwardEnv(t *testing.T) {
	added := []environ.Var{{Name: "NCCL_DEBUG", Value: "WARN"}}
	env := []string{"NCCL_DEBUG=WARN"}
	list := []string{"NCCL_DEBUG=WARN", "OMPI_MCA_mca_base_env_list=NCCL_DEBUG"}
	job := []string{"-np", "2", "a.out"}
	tests := []struct {
		name     string
		path     string
		args     []string
		env      []string
		wantArgs []string
		wantEnv  []string
	}{
		{"open mpi's launcher: -x", "orterun", job, env, append([]string{"-x", "NCCL_DEBUG"}, job...), env},
		{"the user's list: extended, no -x beside it", "orterun", job, []string{"NCCL_DEBUG=WARN", "OMPI_MCA_mca_base_env_list=FOO"},
			job, []string{"NCCL_DEBUG=WARN", "OMPI_MCA_mca_base_env_list=FOO;NCCL_DEBUG"}},
		{"sh -c exec mpirun: the list", "sh", []string{"-c", "exec mpirun.openmpi -np 2 a.out"}, env, []string{"-c", "exec mpirun.openmpi -np 2 a.out"}, list},
		{"bash -ec, a path and a pipe", "/bin/bash", []string{"-ec", "cd /x; /opt/bin/orterun -np 2 a.out | tee log", "arg0"}, env,
			[]string{"-ec", "cd /x; /opt/bin/orterun -np 2 a.out | tee log", "arg0"}, list},
		{"sh -o pipefail -c", "sh", []string{"-o", "pipefail", "-c", "prterun a.out"}, env, []string{"-o", "pipefail", "-c", "prterun a.out"}, list},
		{"a script passing -x: Open MPI would refuse the list", "sh", []string{"-c", "mpirun.openmpi -x FOO a.out"}, env,
			[]string{"-c", "mpirun.openmpi -x FOO a.out"}, env},
		{"a script with set -x: left alone", "sh", []string{"-c", "set -x; orterun a.out"}, env, []string{"-c", "set -x; orterun a.out"}, env},
		{"a script naming the list itself", "sh", []string{"-c", "orterun --mca mca_base_env_list FOO a.out"}, env,
			[]string{"-c", "orterun --mca mca_base_env_list FOO a.out"}, env},
		{"mpich's launcher in a script", "sh", []string{"-c", "mpiexec.hydra a.out"}, env, []string{"-c", "mpiexec.hydra a.out"}, env},
		{"exec \"$@\" with mpirun in the arguments", "sh", []string{"-c", `exec "$@"`, "sh", "orterun", "a.out"}, env,
			[]string{"-c", `exec "$@"`, "sh", "orterun", "a.out"}, list},
		{"-x in the arguments", "sh", []string{"-c", `exec "$@"`, "sh", "orterun", "-x", "FOO", "a.out"}, env,
			[]string{"-c", `exec "$@"`, "sh", "orterun", "-x", "FOO", "a.out"}, env},
		{"a script file: cannot be read", "sh", []string{"launch.sh"}, env, []string{"launch.sh"}, env},
		{"not a shell", "python3", []string{"-c", "orterun"}, env, []string{"-c", "orterun"}, env},
		{"-c without a script", "sh", []string{"-c"}, env, []string{"-c"}, env},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args, gotEnv, gotAdded := Command{Path: tt.path, Args: tt.args, Env: tt.env}.ForwardEnv(added)
			assert.Equal(t, tt.wantArgs, args)
			assert.Equal(t, tt.wantEnv, gotEnv)
			_, listed := environ.Lookup(gotEnv, OpenMPIEnvList)
			assert.Equal(t, len(added)+map[bool]int{true: 1}[listed], len(gotAdded), "the list is reported as added when set")
		})
	}
	t.Run("nothing added", func(t *testing.T) {
		args, gotEnv, gotAdded := Command{Path: "sh", Args: []string{"-c", "orterun a.out"}, Env: env}.ForwardEnv(nil)
		assert.Equal(t, []string{"-c", "orterun a.out"}, args)
		assert.Equal(t, env, gotEnv)
		assert.Empty(t, gotAdded)
	})
}
