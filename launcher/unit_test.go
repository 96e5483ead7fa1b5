package launcher

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestComposeEnv(t *testing.T) {
	debug := EnvVar{Name: "NCCL_DEBUG", Value: "WARN", Reason: "r1"}
	hca := EnvVar{Name: "NCCL_IB_HCA", Value: "=mlx5_0", Reason: "r2"}
	tests := []struct {
		name      string
		base      []string
		adds      []EnvVar
		preset    map[string]string
		wantEnv   []string
		wantAdded []EnvVar
	}{
		{"adds, sorted", []string{"PATH=/bin", "HOME=/root"}, []EnvVar{debug, hca}, nil,
			[]string{"HOME=/root", "NCCL_DEBUG=WARN", "NCCL_IB_HCA==mlx5_0", "PATH=/bin"}, []EnvVar{debug, hca}},
		{"set in base, even empty", []string{"NCCL_DEBUG="}, []EnvVar{debug}, nil,
			[]string{"NCCL_DEBUG="}, nil},
		{"set in NCCL's config", nil, []EnvVar{debug, hca}, map[string]string{"NCCL_DEBUG": "INFO"},
			[]string{"NCCL_IB_HCA==mlx5_0"}, []EnvVar{hca}},
		{"repeated add once", nil, []EnvVar{debug, {Name: "NCCL_DEBUG", Value: "INFO"}}, nil,
			[]string{"NCCL_DEBUG=WARN"}, []EnvVar{debug}},
		{"duplicates in base keep their order", []string{"B=1", "A=2", "A=1"}, nil, nil,
			[]string{"A=2", "A=1", "B=1"}, nil},
		{"prefix names sort by name", []string{"NCCL_IB=1", "NCCL=2"}, nil, nil,
			[]string{"NCCL=2", "NCCL_IB=1"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := append([]string(nil), tt.base...)
			env, added := ComposeEnv(base, tt.adds, tt.preset)
			assert.Equal(t, tt.wantEnv, env)
			assert.Equal(t, tt.wantAdded, added)
			assert.Equal(t, tt.base, base, "base is not modified")
		})
	}
}

func TestParseStat(t *testing.T) {
	tests := []struct {
		in      string
		want    proc
		wantErr bool
	}{
		{"42 (bash) S 1 42 42 0", proc{PID: 42, PPID: 1, State: 'S'}, false},
		{"7 (a) b (c)) Z 3 7", proc{PID: 7, PPID: 3, State: 'Z'}, false},
		{"7 (x y) R 0 7", proc{PID: 7, PPID: 0, State: 'R'}, false},
		{"garbage", proc{}, true},
		{"7 (x) R", proc{}, true},
	}
	for _, tt := range tests {
		got, err := parseStat([]byte(tt.in))
		if tt.wantErr {
			assert.Error(t, err, tt.in)
			continue
		}
		require.NoError(t, err, tt.in)
		assert.Equal(t, tt.want, got, tt.in)
	}
}

func TestDescendants(t *testing.T) {
	ds, err := descendants("testdata/proc", 1)
	require.NoError(t, err)
	assert.Equal(t, []proc{
		{PID: 100, PPID: 1, State: 'S'},
		{PID: 101, PPID: 100, State: 'S'},
		{PID: 102, PPID: 1, State: 'Z'},
		{PID: 300, PPID: 101, State: 'S'}, // a worker in its own session still descends from 1
	}, ds)
	ds, err = descendants("testdata/proc", 101)
	require.NoError(t, err)
	assert.Equal(t, []proc{{PID: 300, PPID: 101, State: 'S'}}, ds)
	_, err = descendants("testdata/nowhere", 1)
	assert.Error(t, err)
}

// TestParseCaps: DropCaps names in every spelling; an unknown one is
// ErrCapability (the names themselves: internal/caps).
func TestParseCaps(t *testing.T) {
	for _, n := range []string{"IPC_LOCK", "CAP_IPC_LOCK", "cap_ipc_lock", " ipc_lock "} {
		m, err := parseCaps([]string{n})
		require.NoError(t, err, n)
		assert.Equal(t, uint64(1)<<14, m, n)
	}
	m, err := parseCaps([]string{"CAP_CHECKPOINT_RESTORE", "SYS_RESOURCE"})
	require.NoError(t, err)
	assert.Equal(t, uint64(1)<<40|1<<24, m)
	_, err = parseCaps([]string{"IPC_LOCK", "IPC_LOKC"})
	assert.ErrorIs(t, err, ErrCapability)
}

func TestResolveUser(t *testing.T) {
	tests := []struct {
		spec    string
		want    User
		wantErr bool
	}{
		{"0", User{UID: 0, GID: 0, Groups: []uint32{0}}, false},
		{"root", User{UID: 0, GID: 0, Groups: []uint32{0}}, false},
		{"root:12", User{UID: 0, GID: 12, Groups: []uint32{12}}, false},
		{"4242:4343", User{UID: 4242, GID: 4343, Groups: []uint32{4343}}, false},
		{"4242", User{UID: 4242, GID: uint32(os.Getgid()), Groups: []uint32{}}, false},
		{"", User{}, true},
		{"root:", User{}, true},
		{"ncclrun-no-such-user", User{}, true},
		{"0:ncclrun-no-such-group", User{}, true},
		{"4294967295", User{}, true},
		{"4294967295:0", User{}, true},
		{"0:4294967295", User{}, true},
		{"root:4294967295", User{}, true},
		{"4294967294:4294967294", User{UID: 4294967294, GID: 4294967294, Groups: []uint32{4294967294}}, false},
	}
	for _, tt := range tests {
		got, err := ResolveUser(tt.spec)
		if tt.wantErr {
			assert.ErrorIs(t, err, ErrUser, tt.spec)
			continue
		}
		require.NoError(t, err, tt.spec)
		assert.Equal(t, tt.want, got, tt.spec)
	}
}
