package launcher

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestWithOpenMPIEnvList(t *testing.T) {
	debug := EnvVar{Name: "NCCL_DEBUG", Value: "WARN"}
	hca := EnvVar{Name: "NCCL_IB_HCA", Value: "=mlx5_0"}
	tests := []struct {
		name     string
		env      []string
		added    []EnvVar
		wantEnv  []string
		wantList string // "": no OMPI_MCA_mca_base_env_list added
	}{
		{"nothing added", []string{"PATH=/bin"}, nil, []string{"PATH=/bin"}, ""},
		{"names joined by ';', env sorted", []string{"A=1", "NCCL_DEBUG=WARN", "NCCL_IB_HCA==mlx5_0", "PATH=/bin"}, []EnvVar{debug, hca},
			[]string{"A=1", "NCCL_DEBUG=WARN", "NCCL_IB_HCA==mlx5_0", "OMPI_MCA_mca_base_env_list=NCCL_DEBUG;NCCL_IB_HCA", "PATH=/bin"},
			"NCCL_DEBUG;NCCL_IB_HCA"},
		{"the user's list is extended", []string{"NCCL_DEBUG=WARN", "OMPI_MCA_mca_base_env_list=FOO;BAR=1"}, []EnvVar{debug},
			[]string{"NCCL_DEBUG=WARN", "OMPI_MCA_mca_base_env_list=FOO;BAR=1;NCCL_DEBUG"}, "FOO;BAR=1;NCCL_DEBUG"},
		{"a name the user lists is not repeated", []string{"NCCL_DEBUG=WARN", "OMPI_MCA_mca_base_env_list=NCCL_DEBUG=INFO"}, []EnvVar{debug},
			[]string{"NCCL_DEBUG=WARN", "OMPI_MCA_mca_base_env_list=NCCL_DEBUG=INFO"}, ""},
		{"the user's delimiter", []string{"NCCL_DEBUG=WARN", "OMPI_MCA_mca_base_env_list=FOO", "OMPI_MCA_mca_base_env_list_delimiter=,"}, []EnvVar{debug},
			[]string{"NCCL_DEBUG=WARN", "OMPI_MCA_mca_base_env_list=FOO,NCCL_DEBUG", "OMPI_MCA_mca_base_env_list_delimiter=,"}, "FOO,NCCL_DEBUG"},
		{"a delimiter Open MPI refuses: left alone", []string{"NCCL_DEBUG=WARN", "OMPI_MCA_mca_base_env_list_delimiter=;;"}, []EnvVar{debug},
			[]string{"NCCL_DEBUG=WARN", "OMPI_MCA_mca_base_env_list_delimiter=;;"}, ""},
		{"an empty user list is replaced", []string{"NCCL_DEBUG=WARN", "OMPI_MCA_mca_base_env_list="}, []EnvVar{debug},
			[]string{"NCCL_DEBUG=WARN", "OMPI_MCA_mca_base_env_list=NCCL_DEBUG"}, "NCCL_DEBUG"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := append([]string(nil), tt.env...)
			added := append([]EnvVar(nil), tt.added...)
			gotEnv, gotAdded := WithOpenMPIEnvList(env, added)
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
