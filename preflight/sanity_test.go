package preflight

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ncclrun/ncclrun/internal/environ"
)

const limitsStackUnlimited = "Limit                     Soft Limit           Hard Limit           Units     \n" +
	"Max stack size            unlimited            unlimited            bytes     \n" +
	"Max locked memory         unlimited            unlimited            bytes     \n"

const limitsStack8M = "Limit                     Soft Limit           Hard Limit           Units     \n" +
	"Max stack size            8388608              unlimited            bytes     \n" +
	"Max locked memory         unlimited            unlimited            bytes     \n"

const gid = "fe80:0000:0000:0000:0a00:27ff:fe4e:1a2b\n"
const noGID = "0000:0000:0000:0000:0000:0000:0000:0000\n"

// gids gives the port of roce-node's two HCAs the GID at index idx.
func gids(idx, value string) map[string]string {
	m := map[string]string{}
	for _, d := range []string{"mlx5_0", "mlx5_1"} {
		m["sys/class/infiniband/"+d+"/ports/1/gids/"+idx] = value
	}
	return m
}

func merge(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// TestEnvSanity: each trap of the env-sanity check on a tree (ib-node with
// files laid over it), and the NCCL version that decides the rule.
func TestEnvSanity(t *testing.T) {
	libDir := "usr/lib/x86_64-linux-gnu/"
	// A library without a version in its name whose version string lies
	// across the first 1 MiB boundary of the scan.
	var lib bytes.Buffer
	lib.Write(bytes.Repeat([]byte{0x7f}, 1<<20-8))
	lib.WriteString("NCCL version 2.21.5+cuda12.4\x00")
	lib.Write(bytes.Repeat([]byte{0}, 4096))
	logind := "[Login]\n#RemoveIPC=yes\nKillUserProcesses=no\n"
	cases := []struct {
		name    string
		tree    string // "" is ib-node
		files   map[string]string
		env     []string
		user    string
		status  Status
		vars    []string // the problems' variables, in order
		has     []string // in the summary or the fix
		version string
	}{
		{name: "clean", status: OK},
		{name: "stack unlimited, version unknown", files: map[string]string{"proc/self/limits": limitsStackUnlimited}, status: Warn, vars: []string{"RLIMIT_STACK"},
			has: []string{"RLIMIT_STACK is unlimited", "2 MiB", "NCCL before 2.28 (assumed: NCCL's version was not found", "ulimit -s 8192"}},
		{name: "stack unlimited, NCCL 2.27.3", files: map[string]string{"proc/self/limits": limitsStackUnlimited, libDir + "libnccl.so.2.27.3": "", libDir + "libnccl.so.2": ""}, status: Warn,
			vars: []string{"RLIMIT_STACK"}, has: []string{"NCCL 2.27.3 (before 2.28)"}, version: "2.27.3"},
		{name: "stack unlimited, NCCL 2.28.3", files: map[string]string{"proc/self/limits": limitsStackUnlimited, libDir + "libnccl.so.2.28.3": ""}, status: OK, version: "2.28.3"},
		{name: "stack finite", files: map[string]string{"proc/self/limits": limitsStack8M}, status: OK},
		{name: "version string inside the library", files: map[string]string{"proc/self/limits": limitsStackUnlimited, libDir + "libnccl.so.2": lib.String()}, status: Warn,
			vars: []string{"RLIMIT_STACK"}, has: []string{"NCCL 2.21.5 (before 2.28)"}, version: "2.21.5"},
		{name: "LD_LIBRARY_PATH first", files: map[string]string{"proc/self/limits": limitsStackUnlimited, libDir + "libnccl.so.2.27.3": "", "opt/nccl/2.29/lib/libnccl.so.2.29.1": ""},
			env: []string{"LD_LIBRARY_PATH=/opt/nccl/2.29/lib"}, status: OK, version: "2.29.1"},
		{name: "debug file shared by 8 local ranks", env: []string{"NCCL_DEBUG_FILE=/shared/nccl.log"}, status: Warn, vars: []string{"NCCL_DEBUG_FILE"},
			has: []string{`NCCL_DEBUG_FILE="/shared/nccl.log" has no %p`, "8 GPUs", "NCCL_DEBUG_FILE=/shared/nccl.%h.%p.log"}},
		{name: "debug file shared across nodes", env: []string{"NCCL_DEBUG_FILE=/shared/nccl.%p.log", "WORLD_SIZE=16", "LOCAL_WORLD_SIZE=8"}, status: Warn, vars: []string{"NCCL_DEBUG_FILE"},
			has: []string{"has no %h", "WORLD_SIZE=16 > LOCAL_WORLD_SIZE=8", "NCCL_DEBUG_FILE=/shared/nccl.%p.%h.log"}},
		{name: "debug file per host and pid", env: []string{"NCCL_DEBUG_FILE=/shared/nccl.%h.%p", "WORLD_SIZE=16", "LOCAL_WORLD_SIZE=8"}, status: OK},
		{name: "topology file missing", env: []string{"NCCL_TOPO_FILE=/etc/nccl/topo.xml"}, status: Warn, vars: []string{"NCCL_TOPO_FILE"}, has: []string{`NCCL_TOPO_FILE="/etc/nccl/topo.xml" does not exist`}},
		{name: "topology file there", files: map[string]string{"etc/nccl/topo.xml": "<system version=\"1\"></system>\n"}, env: []string{"NCCL_TOPO_FILE=/etc/nccl/topo.xml"}, status: OK},
		{name: "topology file is a directory", files: map[string]string{"etc/nccl/topo/x": ""}, env: []string{"NCCL_TOPO_FILE=/etc/nccl/topo"}, status: Warn, vars: []string{"NCCL_TOPO_FILE"}, has: []string{"cannot be read (not a regular file)"}},
		{name: "topology file set in nccl.conf", files: map[string]string{"etc/nccl.conf": "NCCL_TOPO_FILE=/nope.xml\n"}, status: Warn, vars: []string{"NCCL_TOPO_FILE"}},
		{name: "GID index without a GID", tree: "roce-node", files: gids("0", gid), env: []string{"NCCL_IB_GID_INDEX=3"}, status: Warn, vars: []string{"NCCL_IB_GID_INDEX"},
			has: []string{"NCCL_IB_GID_INDEX=3 but mlx5_0:1, mlx5_1:1 have no GID at index 3", "unset it where NCCL is 2.21 or later"}},
		{name: "GID index all zeros on one port", tree: "roce-node", files: merge(gids("3", gid), map[string]string{"sys/class/infiniband/mlx5_1/ports/1/gids/3": noGID, libDir + "libnccl.so.2.23.4": ""}),
			env: []string{"NCCL_IB_GID_INDEX=3"}, status: Warn, vars: []string{"NCCL_IB_GID_INDEX"}, has: []string{"mlx5_1:1 has no GID at index 3", "unset NCCL_IB_GID_INDEX: NCCL 2.23.4 finds"}, version: "2.23.4"},
		{name: "GID index with GIDs", tree: "roce-node", files: gids("3", gid), env: []string{"NCCL_IB_GID_INDEX=3"}, status: OK},
		{name: "GID index -1 (auto)", tree: "roce-node", env: []string{"NCCL_IB_GID_INDEX=-1"}, status: OK},
		{name: "GID index on InfiniBand ports (unused there)", env: []string{"NCCL_IB_GID_INDEX=3"}, status: OK},
		{name: "RemoveIPC by systemd's default", files: map[string]string{"etc/systemd/logind.conf": logind}, user: "trainer", status: Warn, vars: []string{"RemoveIPC"},
			has: []string{"systemd's default is yes", "uid 1000", "/dev/shm/nccl-*", "RemoveIPC=no"}},
		{name: "RemoveIPC=yes in a drop-in", files: map[string]string{"etc/systemd/logind.conf": logind + "RemoveIPC=no\n", "etc/systemd/logind.conf.d/50-site.conf": "[Login]\nRemoveIPC=yes\n"}, user: "trainer",
			status: Warn, vars: []string{"RemoveIPC"}, has: []string{"RemoveIPC=yes in /etc/systemd/logind.conf.d/50-site.conf"}},
		{name: "RemoveIPC=no in a later drop-in", files: map[string]string{"etc/systemd/logind.conf": logind, "usr/lib/systemd/logind.conf.d/10-a.conf": "[Login]\nRemoveIPC=yes\n", "etc/systemd/logind.conf.d/90-nccl.conf": "[Login]\nRemoveIPC=no\n"},
			user: "trainer", status: OK},
		{name: "RemoveIPC spares root", files: map[string]string{"etc/systemd/logind.conf": logind}, status: OK},
		{name: "RemoveIPC does not apply in a pod", files: map[string]string{"etc/systemd/logind.conf": logind}, user: "trainer", env: []string{"KUBERNETES_SERVICE_HOST=10.0.0.1"}, status: OK},
		{name: "RemoveIPC on a Slurm node", files: map[string]string{"etc/systemd/logind.conf": "[Login]\nRemoveIPC=yes\n"}, user: "trainer", env: []string{"SLURM_JOB_ID=7"}, status: Warn, vars: []string{"RemoveIPC"}},
		{name: "socket interfaces apart", env: []string{"NCCL_SOCKET_IFNAME=ib", "GLOO_SOCKET_IFNAME=eth0"}, status: Warn, vars: []string{"GLOO_SOCKET_IFNAME"},
			has: []string{`GLOO_SOCKET_IFNAME="eth0" names eth0, which NCCL_SOCKET_IFNAME="ib" does not select`}},
		{name: "socket interfaces excluded", env: []string{"NCCL_SOCKET_IFNAME=^eth", "GLOO_SOCKET_IFNAME=eth0"}, status: Warn, vars: []string{"GLOO_SOCKET_IFNAME"}},
		{name: "socket interfaces agree", env: []string{"NCCL_SOCKET_IFNAME=ib0", "GLOO_SOCKET_IFNAME=ib0"}, status: OK},
		{name: "socket interfaces agree by prefix", env: []string{"NCCL_SOCKET_IFNAME=^lo,docker", "GLOO_SOCKET_IFNAME=ib0"}, status: OK},
		{name: "exact name differs", env: []string{"NCCL_SOCKET_IFNAME==ib0", "GLOO_SOCKET_IFNAME=ib0.100"}, status: Warn, vars: []string{"GLOO_SOCKET_IFNAME"}},
		{name: "all at once", files: map[string]string{"proc/self/limits": limitsStackUnlimited, "etc/systemd/logind.conf": logind}, user: "trainer",
			env: []string{"NCCL_DEBUG_FILE=/tmp/nccl", "NCCL_TOPO_FILE=/x.xml", "NCCL_IB_GID_INDEX=5", "NCCL_SOCKET_IFNAME=ib", "GLOO_SOCKET_IFNAME=eth0"}, status: Warn,
			tree: "roce-node", vars: []string{"RLIMIT_STACK", "NCCL_DEBUG_FILE", "NCCL_TOPO_FILE", "NCCL_IB_GID_INDEX", "GLOO_SOCKET_IFNAME"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tree := tc.tree
			if tree == "" {
				tree = "ib-node"
			}
			root := overlay(t, tree, tc.files)
			env := append([]string{}, tc.env...)
			rep := Run(context.Background(), Options{Root: root, Env: env, Plan: Plan{User: tc.user}})
			r, ok := rep.Check(IDEnvSanity)
			require.True(t, ok)
			assert.Equal(t, tc.status, r.Status, r.Summary)
			var vars []string
			if ps, ok := r.Details["problems"].([]sanityProblem); ok {
				for _, p := range ps {
					vars = append(vars, p.Variable)
				}
			}
			assert.Equal(t, tc.vars, vars, r.Summary)
			for _, h := range tc.has {
				assert.Contains(t, r.Summary+" | "+r.Fix, h)
			}
			if tc.status == Warn {
				assert.NotEmpty(t, r.Fix)
			}
			if tc.version == "" {
				assert.False(t, rep.Facts.NCCLVersion.Known())
				assert.Contains(t, r.Details["assumed"], "NCCL's version was not found")
			} else {
				assert.Equal(t, tc.version, rep.Facts.NCCLVersion.String())
				assert.Equal(t, tc.version, r.Details["nccl_version"])
			}
		})
	}
}

// TestEnvSanityRecord: what the check reads is what Record reports (so a
// snapshot carries it): the library's name, the logind files, the GID.
func TestEnvSanityRecord(t *testing.T) {
	root := overlay(t, "roce-node", merge(gids("3", gid), map[string]string{
		"usr/lib/x86_64-linux-gnu/libnccl.so.2.27.3": "", "etc/systemd/logind.conf.d/50-site.conf": "[Login]\nRemoveIPC=yes\n",
	}))
	seen := map[string]bool{}
	Record(context.Background(), Options{Root: root, Env: []string{"NCCL_IB_GID_INDEX=3", "NCCL_TOPO_FILE=/etc/passwd"}}, func(r Read) {
		if r.Rel == "etc/passwd" && r.Kind == ReadExists {
			seen["topo exists"] = true
		}
		if r.Err == nil {
			seen[r.Rel] = true
			for _, n := range r.Names {
				seen[r.Rel+"/"+n] = true
			}
		}
	})
	for _, p := range []string{"usr/lib/x86_64-linux-gnu/libnccl.so.2.27.3", "etc/systemd/logind.conf.d/50-site.conf", "sys/class/infiniband/mlx5_1/ports/1/gids/3", "topo exists"} {
		assert.True(t, seen[p], p)
	}
}

func TestFindVersionString(t *testing.T) {
	v, ok := findVersionString(strings.NewReader("xx NCCL version 2.18.3+cuda12.1 yy"))
	require.True(t, ok)
	assert.Equal(t, NCCLVersion{Major: 2, Minor: 18, Patch: 3}, v)
	_, ok = findVersionString(strings.NewReader("NCCL version %d.%d.%d"))
	assert.False(t, ok)
	assert.True(t, NCCLVersion{Major: 2, Minor: 27, Patch: 9}.Before(2, 28))
	assert.False(t, NCCLVersion{Major: 2, Minor: 28}.Before(2, 28))
	assert.False(t, NCCLVersion{Major: 3}.Before(2, 28))
}

// TestCRIOAdvice: in a CRI-O pod under the systemd cgroup manager the
// memlock fix starts with CRI-O's default_ulimits and says to check with
// doctor; under containerd, or CRI-O with cgroupfs, it does not.
func TestCRIOAdvice(t *testing.T) {
	for _, tc := range []struct {
		cgroup string
		crio   bool
	}{
		{"0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1234.slice/crio-0123abcd.scope\n", true},
		{"0::/kubepods/besteffort/pod1234/crio-0123abcd\n", false},
		{"0::/kubepods/besteffort/pod1234/cri-containerd-abcd\n", false},
	} {
		root := overlay(t, "k8s-trap", map[string]string{"proc/self/cgroup": tc.cgroup, "proc/1/cgroup": tc.cgroup})
		rep := Run(context.Background(), Options{Root: root, Env: []string{}})
		r, _ := rep.Check(IDMemlock)
		require.Equal(t, Fail, r.Status)
		first := strings.HasPrefix(r.Fix, "CRI-O with the systemd cgroup manager")
		assert.Equal(t, tc.crio, first, r.Fix)
		assert.Equal(t, r.Fix, rep.Facts.Memlock.Fix)
		if tc.crio {
			for _, w := range []string{`default_ulimits = ["memlock=-1:-1"]`, "crio.conf", "DefaultLimitMEMLOCK", "cri-o/cri-o#10006", "`ncclrun doctor` in a new pod"} {
				assert.Contains(t, r.Fix, w)
			}
			assert.Equal(t, "cri-o (systemd cgroup manager)", r.Details["runtime"])
		}
	}
}

// TestNCCLVersionSameDir: on the live system a library directory reached
// again through a link (lib -> usr/lib, merged /usr) is not listed twice,
// and the version is the one found when every directory is listed.
func TestNCCLVersionSameDir(t *testing.T) {
	cases := []struct {
		name  string
		files []string // created empty under the root
		links map[string]string
		env   map[string]string
		want  NCCLVersion
	}{
		{name: "merged usr, no library", links: map[string]string{"lib": "usr/lib"},
			files: []string{"usr/lib/libc.so.6"}},
		{name: "merged usr, versioned name", links: map[string]string{"lib": "usr/lib"},
			files: []string{"usr/lib/libnccl.so.2", "usr/lib/libnccl.so.2.21.5"},
			want:  NCCLVersion{Major: 2, Minor: 21, Patch: 5, From: "usr/lib/libnccl.so.2.21.5"}},
		{name: "LD_LIBRARY_PATH names a link to a later directory", links: map[string]string{"opt/nccl": "usr/local/lib"},
			files: []string{"usr/local/lib/libnccl.so.2.19.3"}, env: map[string]string{"LD_LIBRARY_PATH": "/opt/nccl"},
			want: NCCLVersion{Major: 2, Minor: 19, Patch: 3, From: "opt/nccl/libnccl.so.2.19.3"}},
		{name: "a link to a directory listed without a library", links: map[string]string{"lib64": "usr/lib64"},
			files: []string{"usr/lib64/libm.so.6", "lib/libnccl.so.2.28.3"},
			want:  NCCLVersion{Major: 2, Minor: 28, Patch: 3, From: "lib/libnccl.so.2.28.3"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range tc.files {
				p := filepath.Join(dir, f)
				require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
				require.NoError(t, os.WriteFile(p, nil, 0o644))
			}
			for l, target := range tc.links {
				p := filepath.Join(dir, l)
				require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
				require.NoError(t, os.Symlink(filepath.Join(dir, target), p))
			}
			live := sysRoot{dir: dir, live: true}
			assert.Equal(t, tc.want, ncclVersion(live, tc.env))
			// Without the live flag every directory is listed: the same answer.
			assert.Equal(t, tc.want, ncclVersion(sysRoot{dir: dir}, tc.env))
		})
	}
}

// TestEnvSanityVersionOnDemand: asked on demand, NCCL's version is read
// only where a rule's verdict depends on it (an unlimited stack, a GID
// index without a GID), once at most, and the result is then the one an
// eager read gives; otherwise it is not read and the details do not
// report it.
func TestEnvSanityVersionOnDemand(t *testing.T) {
	libDir := "usr/lib/x86_64-linux-gnu/"
	cases := []struct {
		name  string
		tree  string // "" is ib-node
		files map[string]string
		env   []string
		asks  int
	}{
		{name: "clean", asks: 0},
		{name: "stack finite", files: map[string]string{"proc/self/limits": limitsStack8M, libDir + "libnccl.so.2.27.3": ""}, asks: 0},
		{name: "stack unlimited", files: map[string]string{"proc/self/limits": limitsStackUnlimited, libDir + "libnccl.so.2.27.3": ""}, asks: 1},
		{name: "stack unlimited, version unknown", files: map[string]string{"proc/self/limits": limitsStackUnlimited}, asks: 1},
		{name: "GID index held", tree: "roce-node", files: gids("3", gid), env: []string{"NCCL_IB_GID_INDEX=3"}, asks: 0},
		{name: "GID index missing", tree: "roce-node", files: merge(gids("5", noGID), map[string]string{libDir + "libnccl.so.2.21.5": ""}), env: []string{"NCCL_IB_GID_INDEX=5"}, asks: 1},
		{name: "both rules, one read", tree: "roce-node", files: map[string]string{"proc/self/limits": limitsStackUnlimited, libDir + "libnccl.so.2.27.3": ""},
			env: []string{"NCCL_IB_GID_INDEX=5"}, asks: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tree := tc.tree
			if tree == "" {
				tree = "ib-node"
			}
			s := newRoot(overlay(t, tree, tc.files))
			in := sanityInput{env: environ.Map(tc.env), kind: Host}
			want := ncclVersion(s, in.env)
			asks := 0
			version := func() NCCLVersion { asks++; return want }
			eager, eagerVer := checkSanity(s, in, version, false)
			require.Equal(t, 1, asks)

			asks = 0
			got, gotVer := checkSanity(s, in, version, true)
			assert.Equal(t, tc.asks, asks)
			if tc.asks > 0 {
				assert.Equal(t, eager, got)
				assert.Equal(t, eagerVer, gotVer)
				return
			}
			assert.Equal(t, eager.Status, got.Status)
			assert.Equal(t, eager.Fix, got.Fix)
			assert.Equal(t, eager.Details["problems"], got.Details["problems"])
			assert.NotContains(t, got.Details, "nccl_version")
			assert.NotContains(t, got.Details, "assumed")
			assert.False(t, gotVer.Known())
		})
	}
}

// TestRunVersionOnDemandLive: on the live system with VersionOnDemand the
// library directories are not listed unless the stack limit asks for the
// version: a libnccl.so.X.Y.Z first on LD_LIBRARY_PATH goes unreported,
// and is reported without the option.
func TestRunVersionOnDemandLive(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "libnccl.so.2.27.3"), nil, 0o644))
	env := []string{"PATH=/usr/bin:/bin", "LD_LIBRARY_PATH=" + dir}
	eager := Run(context.Background(), Options{Root: "/", Env: env})
	require.Equal(t, "2.27.3", eager.Facts.NCCLVersion.String())

	var lim unix.Rlimit
	require.NoError(t, unix.Getrlimit(unix.RLIMIT_STACK, &lim))
	rep := Run(context.Background(), Options{Root: "/", Env: env, VersionOnDemand: true})
	r, ok := rep.Check(IDEnvSanity)
	require.True(t, ok)
	if lim.Cur == unix.RLIM_INFINITY {
		assert.Equal(t, "2.27.3", rep.Facts.NCCLVersion.String())
		return
	}
	assert.False(t, rep.Facts.NCCLVersion.Known())
	assert.NotContains(t, r.Details, "nccl_version")
}
