package preflight

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ncclrun/ncclrun/internal/environ"
)

func TestParseHCAList(t *testing.T) {
	cases := []struct {
		in   string
		want NetList
	}{
		{"", NetList{}},
		{"mlx5_0", NetList{Entries: []ListEntry{{"mlx5_0", -1}}}},
		{"=mlx5_0:1,mlx5_1:1", NetList{Exact: true, Entries: []ListEntry{{"mlx5_0", 1}, {"mlx5_1", 1}}}},
		{"^mlx5_2,mlx5_3", NetList{Exclude: true, Entries: []ListEntry{{"mlx5_2", -1}, {"mlx5_3", -1}}}},
		{"^=mlx5_8:1:2:3", NetList{Exclude: true, Exact: true, Entries: []ListEntry{{"mlx5_8", 1}}}},
		{"^=mlx5_8,^=mlx5_14", NetList{Exclude: true, Exact: true, Entries: []ListEntry{{"mlx5_8", -1}, {"^=mlx5_14", -1}},
			Problems: []string{`entry "^=mlx5_14" contains '^' or '=': NCCL reads those only at the start of the whole list, so here they are part of a literal name`}}},
		{"=^mlx5_0", NetList{Exact: true, Entries: []ListEntry{{"^mlx5_0", -1}},
			Problems: []string{`entry "^mlx5_0" contains '^' or '=': NCCL reads those only at the start of the whole list, so here they are part of a literal name`}}},
		{"mlx5_0,,:1,mlx5_1:x", NetList{Entries: []ListEntry{{"mlx5_0", -1}, {"mlx5_1", 0}},
			Problems: []string{`entry ":1" has no name and is ignored`}}},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			assert.Equal(t, tc.want, parseHCAList(tc.in))
		})
	}
	long := strings.Repeat("mlx5_0,", 40)
	l := parseHCAList(long)
	assert.Len(t, l.Entries, maxHCAEntries)
	assert.Contains(t, l.Problems, "the list has 40 entries; NCCL reads only the first 32")
}

func TestNetListMatch(t *testing.T) {
	devs := []struct {
		name string
		port int
	}{{"mlx5_0", 1}, {"mlx5_1", 1}, {"mlx5_10", 1}, {"mlx5_1", 2}}
	cases := []struct {
		list string
		want []bool
	}{
		{"", []bool{true, true, true, true}},
		{"mlx5_1", []bool{false, true, true, true}}, // prefix: mlx5_1 matches mlx5_10
		{"=mlx5_1", []bool{false, true, false, true}},
		{"=mlx5_1:2", []bool{false, false, false, true}},
		{"^mlx5_1", []bool{true, false, false, false}},
		{"^=mlx5_1", []bool{true, false, true, false}},
		{"^=mlx5_0,^=mlx5_1", []bool{false, true, true, true}}, // second name is literal "^=mlx5_1"
	}
	for _, tc := range cases {
		l := parseHCAList(tc.list)
		for i, d := range devs {
			assert.Equal(t, tc.want[i], l.Match(d.name, d.port), "list %q dev %s:%d", tc.list, d.name, d.port)
		}
	}
}

func TestMatchIfname(t *testing.T) {
	all := []string{"lo", "eth0", "eth1", "ib0", "docker0", "virbr0", "enp4s0"}
	cases := []struct {
		spec   string
		ifaces []string
		want   []string
	}{
		{"", all, []string{"ib0"}},
		{"e", all, []string{"ib0"}}, // strlen <= 1: ignored, default order
		{"", []string{"lo", "eth0", "docker0"}, []string{"eth0"}},
		{"", []string{"lo", "docker0", "virbr0"}, []string{"docker0"}},
		{"", []string{"lo", "virbr0"}, []string{"lo"}},
		{"", []string{"virbr0"}, []string{"virbr0"}},
		{"", nil, nil},
		{"eth", all, []string{"eth0", "eth1"}},
		{"=eth", all, nil},
		{"=eth1,enp4s0", all, []string{"eth1", "enp4s0"}},
		{"^docker0", all, []string{"lo", "eth0", "eth1", "ib0", "virbr0", "enp4s0"}}, // re-allows lo and virbr
		{"^=eth0,ib", all, []string{"lo", "eth1", "ib0", "docker0", "virbr0", "enp4s0"}},
		{"en,eth1", all, []string{"eth1", "enp4s0"}},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, matchIfname(tc.spec, tc.ifaces), "spec %q", tc.spec)
	}
}

func TestParseStatus(t *testing.T) {
	good := "Name:\tx\nUid:\t1000\t1001\t1000\t1000\nGid:\t5\t6\t5\t5\nCapInh:\t0000000000000000\nCapPrm:\t0000000000004000\nCapEff:\t0000000000004000\nCapBnd:\t000001ffffffffff\nCapAmb:\t0000000000004000\nNoNewPrivs:\t1\n"
	st, err := parseStatus(strings.NewReader(good))
	require.NoError(t, err)
	assert.Equal(t, procStatus{UID: 1001, GID: 6, Prm: 0x4000, Eff: 0x4000, Bnd: 0x1ffffffffff, Amb: 0x4000, HasAmb: true, NoNewPrivs: true, HasNNP: true}, st)
	assert.Equal(t, CapSets{Effective: true, Permitted: true, Bounding: true, Ambient: true}, st.sets(capIPCLock))

	for _, bad := range []string{
		"",
		"Uid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nCapPrm:\t0\nCapEff:\t0\n",                     // no CapBnd
		"Uid:\t0\nGid:\t0\t0\nCapPrm:\t0\nCapEff:\t0\nCapBnd:\t0\n",                        // short Uid
		"Uid:\t0\t0\nGid:\t0\t0\nCapPrm:\tzz\nCapEff:\t0\nCapBnd:\t0\n",                    // bad mask
		"Uid:\t0\t0\nGid:\t0\t0\nCapPrm:\t00000000000000000\nCapEff:\t0\nCapBnd:\t0\n",     // 17 digits
		"Uid:\t0\t0\nGid:\t0\t0\nCapPrm:\t0\nCapEff:\t0\nCapBnd:\t0\nNoNewPrivs:\tmaybe\n", // bad NNP
	} {
		_, err := parseStatus(strings.NewReader(bad))
		assert.ErrorIs(t, err, ErrMalformed, "%q", bad)
	}
}

func TestParseMemlockLimits(t *testing.T) {
	cases := []struct {
		in   string
		want Rlimit
		err  bool
	}{
		{"Limit Soft Limit Hard Limit Units\nMax locked memory         65536                65536                bytes\n", Rlimit{Soft: 65536, Hard: 65536}, false},
		{"Max locked memory         8388608              unlimited            bytes\n", Rlimit{Soft: 8388608, Hard: Unlimited}, false},
		{"Max locked memory unlimited unlimited bytes", Rlimit{Soft: Unlimited, Hard: Unlimited}, false},
		{"Max locked memory 18446744073709551615 18446744073709551615 bytes", Rlimit{Soft: Unlimited, Hard: Unlimited}, false},
		{"Max locked memory 0 0 bytes", Rlimit{Soft: 0, Hard: 0}, false},
		{"Max locked memory lots 1 bytes", Rlimit{}, true},
		{"Max locked memory 1", Rlimit{}, true},
		{"Max open files 1 1 files", Rlimit{}, true},
	}
	for _, tc := range cases {
		got, err := parseMemlockLimits(strings.NewReader(tc.in))
		if tc.err {
			assert.ErrorIs(t, err, ErrMalformed, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.want, got, tc.in)
	}
}

func TestParseUIDMap(t *testing.T) {
	cases := []struct {
		in     string
		userns bool
		err    bool
	}{
		{"         0          0 4294967295\n", false, false},
		{"         0     100000      65536\n", true, false},
		{"0 0 4294967295\n1 1 1\n", true, false},
		{"", true, false},
		{"x y\n", false, true},
		{"0 0 abc\n", false, true},
	}
	for _, tc := range cases {
		got, err := parseUIDMap([]byte(tc.in))
		if tc.err {
			assert.ErrorIs(t, err, ErrMalformed, tc.in)
			continue
		}
		require.NoError(t, err)
		assert.Equal(t, tc.userns, got, tc.in)
	}
}

func TestParseSysfsState(t *testing.T) {
	for in, want := range map[string]string{"4: ACTIVE": "ACTIVE", "1: DOWN\n": "DOWN", "5: LinkUp": "LinkUp", "ACTIVE": "ACTIVE"} {
		got, err := parseSysfsState(in)
		require.NoError(t, err)
		assert.Equal(t, want, got)
	}
	for _, in := range []string{"", "x: ACTIVE", "4:", "  "} {
		_, err := parseSysfsState(in)
		assert.ErrorIs(t, err, ErrMalformed, in)
	}
}

func TestParseSizeOption(t *testing.T) {
	cases := []struct {
		in    string
		total int64
		want  int64
		known bool
		err   bool
	}{
		{"65536k", 0, 64 << 20, true, false},
		{"64m", 0, 64 << 20, true, false},
		{"1g", 0, 1 << 30, true, false},
		{"1G", 0, 1 << 30, true, false},
		{"67108864", 0, 64 << 20, true, false},
		{"50%", 8 << 30, 4 << 30, true, false},
		{"50%", 0, 0, false, false},
		{"", 0, 0, false, true},
		{"k", 0, 0, false, true},
		{"99999999999999999999e", 0, 0, false, true},
		{"9999999999e", 0, 0, false, true},
		{"x%", 0, 0, false, true},
	}
	for _, tc := range cases {
		got, known, err := parseSizeOption(tc.in, tc.total)
		if tc.err {
			assert.ErrorIs(t, err, ErrMalformed, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.known, known, tc.in)
		assert.Equal(t, tc.want, got, tc.in)
	}
}

func TestMountOptions(t *testing.T) {
	mi := "630 626 0:61 / /dev/shm rw,nosuid - tmpfs shm rw,size=65536k\n631 626 0:62 / /dev/shm rw - tmpfs shm rw,size=1g\n632 626 0:63 / /mnt/a\\040b rw - ext4 /dev/sda rw\n"
	fs, opts, ok := mountOptions(strings.NewReader(mi), "/dev/shm", true)
	assert.True(t, ok)
	assert.Equal(t, "tmpfs", fs)
	assert.Equal(t, "rw,size=1g", opts, "the last mount is the visible one")
	_, _, ok = mountOptions(strings.NewReader(mi), "/mnt/a b", true)
	assert.True(t, ok, "octal escapes are decoded")
	fs, opts, ok = mountOptions(strings.NewReader("shm /dev/shm tmpfs rw,nosuid,size=65536k 0 0\n"), "/dev/shm", false)
	assert.Equal(t, []any{"tmpfs", "rw,nosuid,size=65536k", true}, []any{fs, opts, ok})
}

func TestParseDriverVersion(t *testing.T) {
	for in, want := range map[string]string{
		"NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024":              "550.54.15",
		"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.86.15  Release Build  (dvs-builder@U16)": "570.86.15",
		"NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  580.65.06  Release Build":                   "580.65.06",
	} {
		got, err := parseDriverVersion(in)
		require.NoError(t, err)
		assert.Equal(t, want, got)
	}
	_, err := parseDriverVersion("banana")
	assert.ErrorIs(t, err, ErrMalformed)
}

func TestKernelAtLeast(t *testing.T) {
	for rel, want := range map[string]bool{"5.12.0": true, "5.11.22-x": false, "6.1.0": true, "4.19.0": false, "5.15.0-131-generic": true} {
		got, err := kernelAtLeast(rel, 5, 12)
		require.NoError(t, err)
		assert.Equal(t, want, got, rel)
	}
	_, err := kernelAtLeast("banana", 5, 12)
	assert.ErrorIs(t, err, ErrMalformed)
}

func TestNCCLConfig(t *testing.T) {
	root := overlay(t, "ib-node", map[string]string{
		"etc/nccl.conf":               "# image defaults\nNCCL_SOCKET_IFNAME=^docker0\nNCCL_DEBUG=INFO\nno equals sign\n NCCL_SPACED = x\n",
		"home/trainer/.nccl.conf":     "NCCL_DEBUG=WARN\nNCCL_IB_HCA==mlx5_0\nNCCL_DEBUG=TRACE\n",
		"opt/conf/custom.conf":        "NCCL_IB_DISABLE=1\n",
		"home/trainer/.nccl.conf.bak": "ignored=1\n",
	})
	vars, files := ncclConfig(newRoot(root), []string{"HOME=/home/trainer"})
	assert.Equal(t, map[string]string{"NCCL_SOCKET_IFNAME": "^docker0", "NCCL_DEBUG": "WARN", "NCCL_IB_HCA": "=mlx5_0", " NCCL_SPACED ": " x"}, vars)
	assert.Equal(t, []string{"/home/trainer/.nccl.conf", "/etc/nccl.conf"}, files)

	vars, files = ncclConfig(newRoot(root), []string{"HOME=/home/trainer", "NCCL_CONF_FILE=/opt/conf/custom.conf"})
	assert.Equal(t, "1", vars["NCCL_IB_DISABLE"])
	assert.NotContains(t, vars, "NCCL_IB_HCA", "NCCL_CONF_FILE replaces ~/.nccl.conf")
	assert.Equal(t, []string{"/opt/conf/custom.conf", "/etc/nccl.conf"}, files)

	vars, files = ncclConfig(newRoot("testdata/ib-node"), nil)
	assert.Empty(t, vars)
	assert.Empty(t, files)
}

func TestNetworkEnv(t *testing.T) {
	cases := []struct {
		name    string
		env     []string
		files   map[string]string
		status  Status
		summary string
	}{
		{"default picks ib0", nil, nil, OK, "NCCL will use ib0"},
		{"prefix", []string{"NCCL_SOCKET_IFNAME=eth"}, nil, OK, `NCCL will use eth0 (NCCL_SOCKET_IFNAME="eth")`},
		{"exact name that does not exist", []string{"NCCL_SOCKET_IFNAME==eth"}, nil, Fail, `NCCL_SOCKET_IFNAME="=eth" matches no interface that is up with an address (those are: eth0, ib0, lo)`},
		{"down interface does not count", []string{"NCCL_SOCKET_IFNAME=docker0"}, nil, Fail, `NCCL_SOCKET_IFNAME="docker0" matches no interface`},
		{"one character is ignored", []string{"NCCL_SOCKET_IFNAME=e"}, nil, Warn, `NCCL_SOCKET_IFNAME="e" is ignored by NCCL (it needs at least 2 characters), so NCCL picks ib0 by itself`},
		{"malformed", []string{"NCCL_SOCKET_IFNAME=^=eth0,^=ib0"}, nil, Warn, `NCCL_SOCKET_IFNAME="^=eth0,^=ib0" is malformed`},
		{"only lo for a multi-node job", []string{"NCCL_SOCKET_IFNAME=^eth,ib", "MASTER_ADDR=10.0.0.1"}, nil, Warn, "NCCL would use only lo, which other nodes cannot reach, for a multi-node job (MASTER_ADDR=10.0.0.1)"},
		{"only lo on one node is fine", []string{"NCCL_SOCKET_IFNAME=^eth,ib"}, nil, OK, "NCCL will use lo"},
		{"gloo exact names", []string{"GLOO_SOCKET_IFNAME=eth1"}, nil, Fail, `GLOO_SOCKET_IFNAME="eth1" names eth1, which is not up with an address`},
		{"gloo ok", []string{"GLOO_SOCKET_IFNAME=eth0"}, nil, OK, "NCCL will use ib0"},
		{"nccl.conf counts as set", nil, map[string]string{"etc/nccl.conf": "NCCL_SOCKET_IFNAME==bond0\n"}, Fail, `NCCL_SOCKET_IFNAME="=bond0" matches no interface`},
		{"environment wins over nccl.conf", []string{"NCCL_SOCKET_IFNAME=eth0"}, map[string]string{"etc/nccl.conf": "NCCL_SOCKET_IFNAME==bond0\n"}, OK, "NCCL will use eth0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := "testdata/ib-node"
			if tc.files != nil {
				root = overlay(t, "ib-node", tc.files)
			}
			env := tc.env
			if env == nil {
				env = []string{}
			}
			r := Run(context.Background(), Options{Root: root, Env: env})
			n, _ := r.Check(IDNetwork)
			assert.Equal(t, tc.status, n.Status, n.Summary)
			assert.Contains(t, n.Summary, tc.summary)
		})
	}
}

func TestRDMAEnv(t *testing.T) {
	cases := []struct {
		name    string
		env     []string
		status  Status
		summary string
	}{
		{"prefix", []string{"NCCL_IB_HCA=mlx5_1"}, OK, "4 RDMA device(s), all usable"},
		{"nothing", []string{"NCCL_IB_HCA==mlx5_9"}, Warn, `NCCL_IB_HCA="=mlx5_9" matches no usable HCA port (usable: mlx5_0:1, mlx5_1:1, mlx5_2:1, mlx5_3:1)`},
		{"malformed", []string{"NCCL_IB_HCA=^=mlx5_0,^=mlx5_1"}, Warn, `NCCL_IB_HCA="^=mlx5_0,^=mlx5_1" is malformed (entry "^=mlx5_1" contains '^' or '='`},
		{"malformed selects", []string{"NCCL_IB_HCA=^=mlx5_0,^=mlx5_1"}, Warn, "and selects mlx5_1:1, mlx5_2:1, mlx5_3:1"},
		{"ib disabled", []string{"NCCL_IB_DISABLE=1", "NCCL_IB_HCA==mlx5_9"}, OK, "NCCL_IB_DISABLE=1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := Run(context.Background(), Options{Root: "testdata/ib-node", Env: tc.env})
			c, _ := r.Check(IDRDMA)
			assert.Equal(t, tc.status, c.Status, c.Summary)
			assert.Contains(t, c.Summary, tc.summary)
		})
	}
}

func TestEnvironmentDetection(t *testing.T) {
	cases := []struct {
		name  string
		tree  string
		env   []string
		kind  Platform
		clues []string
	}{
		{"kubernetes by env", "ib-node", []string{"KUBERNETES_SERVICE_HOST=10.96.0.1"}, "kubernetes", []string{"KUBERNETES_SERVICE_HOST is set"}},
		{"kubernetes by service account", "k8s-trap", nil, "kubernetes", []string{"var/run/secrets/kubernetes.io/serviceaccount exists", "proc/1/cgroup mentions kubepods", "proc/1/cgroup mentions containerd"}},
		{"kubernetes by every kubelet variable", "ib-node", []string{"KUBERNETES_SERVICE_HOST=10.96.0.1", "KUBERNETES_SERVICE_PORT=443", "KUBERNETES_PORT=tcp://10.96.0.1:443"}, "kubernetes",
			[]string{"KUBERNETES_SERVICE_HOST is set", "KUBERNETES_SERVICE_PORT is set", "KUBERNETES_PORT is set"}},
		// No variables, no service account, a kubepods cgroup: a pod, not
		// Docker.
		{"kubernetes by the cgroup alone", "k8s-cgroup-only", nil, "kubernetes", []string{"proc/self/cgroup mentions kubepods"}},
		{"kubernetes by the kubelet's mounts", "k8s-kubelet-mounts", nil, "kubernetes", []string{"proc/self/mountinfo: /etc/hosts is mounted from the kubelet's pod directory"}},
		{"kubernetes: pod hostname beside a CRI cgroup", "ib-node-containerd", []string{"HOSTNAME=train-worker-x7k2q"}, "kubernetes",
			[]string{"hostname train-worker-x7k2q looks like a pod name", "proc/self/cgroup mentions containerd"}},
		{"docker: a pod-like hostname alone decides nothing", "docker-root", []string{"HOSTNAME=train-worker-x7k2q"}, "docker",
			[]string{".dockerenv exists", "hostname train-worker-x7k2q looks like a pod name (not decisive without a CRI runtime's cgroup)"}},
		{"host: a pod-like hostname alone decides nothing", "ib-node", []string{"HOSTNAME=gpu-node-x7k2q"}, "host",
			[]string{"hostname gpu-node-x7k2q looks like a pod name (not decisive without a CRI runtime's cgroup)"}},
		{"host: an ordinary hostname is no clue", "ib-node", []string{"HOSTNAME=gpu-node-17"}, "host", nil},
		{"slurm inside docker", "roce-node", []string{"SLURM_PROCID=3"}, "slurm", []string{"SLURM_PROCID is set", ".dockerenv exists"}},
		{"podman", "ib-node", []string{"container=podman"}, "docker", []string{"container=podman is set"}},
		{"host", "ib-node", nil, "host", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := tc.env
			if env == nil {
				env = []string{}
			}
			root := "testdata/" + tc.tree
			if tc.tree == "ib-node-containerd" {
				// ib-node with a containerd cgroup and no kubepods (a CRI
				// runtime whose pod cgroups are not named so).
				root = copyTree(t, "testdata/ib-node")
				require.NoError(t, os.WriteFile(filepath.Join(root, "proc/self/cgroup"), []byte("0::/system.slice/containerd.service/cri-containerd-e8565882751f.scope\n"), 0o644))
			}
			e := detectEnvironment(newRoot(root), environ.Map(env))
			assert.Equal(t, tc.kind, e.Kind)
			assert.Equal(t, tc.clues, e.Clues)
		})
	}
}

func TestResolveUser(t *testing.T) {
	s := newRoot("testdata/ib-node")
	cases := []struct {
		spec     string
		uid, gid int
		err      bool
	}{
		{"trainer", 1000, 1000, false},
		{"trainer:root", 1000, 0, false},
		{"1000:1000", 1000, 1000, false},
		{"1000", 1000, 1000, false},
		{"4242", 4242, 0, false},
		{"4242:77", 4242, 77, false},
		{"nobody", 0, 0, true},
		{"trainer:nogroup", 0, 0, true},
		{":1", 0, 0, true},
		// (uid_t)-1 and (gid_t)-1 name nobody: run refuses them (exit 2),
		// so doctor must not judge a CMD that runs as them.
		{"4294967295", 0, 0, true},
		{"4242:4294967295", 0, 0, true},
		{"trainer:4294967295", 0, 0, true},
	}
	for _, tc := range cases {
		uid, gid, err := s.resolveUser(tc.spec)
		if tc.err {
			assert.Error(t, err, tc.spec)
			continue
		}
		require.NoError(t, err, tc.spec)
		assert.Equal(t, []int{tc.uid, tc.gid}, []int{uid, gid}, tc.spec)
	}
}
