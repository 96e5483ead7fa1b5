package main

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ncclrun/ncclrun/preflight"
	"github.com/ncclrun/ncclrun/preflight/snapshot"
)

// extractTarGz unpacks a snapshot tarball into a new directory and returns
// the one top directory it holds. Names that would land outside fail.
func extractTarGz(t *testing.T, r io.Reader) string {
	t.Helper()
	gz, err := gzip.NewReader(r)
	require.NoError(t, err)
	tr := tar.NewReader(gz)
	dst := t.TempDir()
	tops := map[string]bool{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		name := filepath.Clean(filepath.FromSlash(h.Name))
		require.False(t, filepath.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../"), "entry %q leaves the tarball's directory", h.Name)
		tops[strings.Split(name, string(filepath.Separator))[0]] = true
		p := filepath.Join(dst, name)
		switch h.Typeflag {
		case tar.TypeDir:
			require.NoError(t, os.MkdirAll(p, 0o755))
		case tar.TypeReg:
			require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
			b, err := io.ReadAll(tr)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(p, b, 0o644))
		default:
			t.Fatalf("entry %q has type %c: a snapshot holds only files and directories", h.Name, h.Typeflag)
		}
	}
	require.Len(t, tops, 1, "a snapshot tarball has one top directory: %v", tops)
	for top := range tops {
		return filepath.Join(dst, top)
	}
	return ""
}

// snapEnv reads a snapshot's ncclrun-env lines.
func snapEnv(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, preflight.EnvFile))
	require.NoError(t, err)
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}

// ifaceView is a network interface as compared between live and snapshot:
// the live list comes from netlink in kernel order, the snapshot's from
// sys/class/net by name, so order is not compared.
type ifaceView struct {
	up    bool
	addrs []string
}

func ifaces(t *testing.T, c map[string]any) map[string]ifaceView {
	t.Helper()
	out := map[string]ifaceView{}
	l, _ := jpath(t, c, "details", "interfaces").([]any)
	for _, x := range l {
		m := x.(map[string]any)
		v := ifaceView{up: m["up"] == true}
		if as, ok := m["addrs"].([]any); ok {
			for _, a := range as {
				v.addrs = append(v.addrs, a.(string))
			}
		}
		sort.Strings(v.addrs)
		out[m["name"].(string)] = v
	}
	return out
}

func sortedStrings(v any) []string {
	l, _ := v.([]any)
	out := []string{}
	for _, x := range l {
		out = append(out, x.(string))
	}
	sort.Strings(out)
	return out
}

// TestSnapshotMatchesLiveDoctor is the proof that --root reads what the
// live path reads: a snapshot of this machine, analysed with doctor --root
// and the environment it recorded, gives the same checks with the same
// statuses and key details as doctor on the live system. Excluded, because
// a snapshot cannot carry them: capabilities.file_capability (getxattr on
// the running binary), shm.source (statfs live, the mount line in a
// snapshot), and the order of network interfaces and addresses (netlink
// order live, names in sysfs order in a snapshot).
func TestSnapshotMatchesLiveDoctor(t *testing.T) {
	home := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(home, ".nccl.conf"),
		[]byte("# site settings\nNCCL_IB_TIMEOUT=22\nAWS_SECRET_ACCESS_KEY=conf-secret\n"), 0o644))
	env := []string{
		"HOME=" + home, "SLURM_JOB_ID=4242", "NCCL_DEBUG=INFO",
		"SECRET_TOKEN=env-secret", "AWS_SESSION_TOKEN=env-secret",
	}
	out := filepath.Join(t.TempDir(), "snap.tar.gz")
	r := invocation{args: []string{"snapshot", "--output", out}, env: env}.run(t)
	require.Equal(t, 0, r.code, "stderr: %q", r.stderr)
	require.Empty(t, r.stdout)
	require.Len(t, r.errLines(), 1, "stderr: %q", r.stderr)
	require.Contains(t, r.stderr, "ncclrun: snapshot written to "+out)
	require.Contains(t, r.stderr, "ncclrun doctor --root snap")

	f, err := os.Open(out)
	require.NoError(t, err)
	defer f.Close()
	dir := extractTarGz(t, f)
	require.Equal(t, "snap", filepath.Base(dir))
	senv := snapEnv(t, dir)
	require.ElementsMatch(t, []string{"HOME=" + home, "SLURM_JOB_ID=4242", "NCCL_DEBUG=INFO"}, senv)

	liveR := invocation{args: []string{"doctor", "--json"}, env: env}.run(t)
	// No environment passed: doctor --root reads the snapshot's ncclrun-env.
	snapR := invocation{args: []string{"doctor", "--json", "--root", dir}}.run(t)
	require.Equal(t, liveR.code, snapR.code, "live stderr %q, snapshot stderr %q", liveR.stderr, snapR.stderr)
	live, snap := decodeJSON(t, liveR.stdout), decodeJSON(t, snapR.stdout)

	require.Equal(t, "slurm", jpath(t, live, "environment", "kind"))
	require.Equal(t, live["environment"], snap["environment"])

	ids := func(doc map[string]any) (out [][2]string) {
		for _, c := range doc["checks"].([]any) {
			m := c.(map[string]any)
			out = append(out, [2]string{m["id"].(string), m["status"].(string)})
		}
		return out
	}
	require.Equal(t, ids(live), ids(snap), "check ids and statuses")

	// NCCL's configuration file: the NCCL_ line travels, nothing else.
	require.Equal(t, "22", jpath(t, check(t, live, "environment"), "details", "nccl_conf", "NCCL_IB_TIMEOUT"))
	require.Equal(t, "22", jpath(t, check(t, snap, "environment"), "details", "nccl_conf", "NCCL_IB_TIMEOUT"))
	require.NotContains(t, jpath(t, check(t, snap, "environment"), "details", "nccl_conf"), "AWS_SECRET_ACCESS_KEY")

	for _, k := range []string{"soft", "hard", "soft_before", "hard_before", "rule"} {
		require.Equal(t, jpath(t, check(t, live, "memlock"), "details", k), jpath(t, check(t, snap, "memlock"), "details", k), "memlock %s", k)
	}
	for _, k := range []string{"uid", "gid", "no_new_privs", "ipc_lock", "sys_resource", "command", "user_namespace", "rule"} {
		require.Equal(t, jpath(t, check(t, live, "capabilities"), "details", k), jpath(t, check(t, snap, "capabilities"), "details", k), "capabilities %s", k)
	}
	require.Equal(t, check(t, live, "capabilities")["summary"], check(t, snap, "capabilities")["summary"])
	require.Equal(t, check(t, live, "memlock")["summary"], check(t, snap, "memlock")["summary"])

	liveRDMA, snapRDMA := check(t, live, "rdma"), check(t, snap, "rdma")
	require.Equal(t, liveRDMA["details"], snapRDMA["details"], "rdma")
	require.Equal(t, check(t, live, "gpu"), check(t, snap, "gpu"))
	require.Equal(t, check(t, live, "gpudirect"), check(t, snap, "gpudirect"))

	mountinfo, err := os.ReadFile(filepath.Join(dir, "proc/self/mountinfo"))
	require.NoError(t, err)
	if strings.Contains(string(mountinfo), " /dev/shm ") {
		require.Equal(t, jpath(t, check(t, live, "shm"), "details", "size_bytes"), jpath(t, check(t, snap, "shm"), "details", "size_bytes"), "shm size_bytes")
		require.Equal(t, check(t, live, "shm")["summary"], check(t, snap, "shm")["summary"])
	} else {
		// /dev/shm is no mount of its own: its size is statfs of the root
		// filesystem, which a snapshot cannot carry (documented).
		t.Logf("this machine's /dev/shm is not a mount; shm size not compared")
	}

	ln, sn := check(t, live, "network"), check(t, snap, "network")
	require.Equal(t, ifaces(t, ln), ifaces(t, sn), "network interfaces")
	require.Equal(t, sortedStrings(jpath(t, ln, "details", "selected")), sortedStrings(jpath(t, sn, "details", "selected")))

	// Neither secret reached the snapshot.
	requireTreeLacks(t, dir, "env-secret", "conf-secret", "SECRET_TOKEN", "AWS_SESSION_TOKEN")
}

// requireTreeLacks fails when any file under dir contains one of words.
func requireTreeLacks(t *testing.T, dir string, words ...string) {
	t.Helper()
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			t.Errorf("%s is a symlink: a snapshot is a flat tree", p)
		}
		if d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, w := range words {
			if strings.Contains(string(b), w) {
				t.Errorf("%s contains %q", p, w)
			}
		}
		return nil
	}))
}

// TestSnapshotOfTreesMatches snapshots each preflight testdata tree (via
// --root) and requires doctor's whole JSON to be the same on the tree and
// on its snapshot: the RDMA, GPU, GPUDirect and platform paths this
// machine lacks.
func TestSnapshotOfTreesMatches(t *testing.T) {
	trees, err := filepath.Glob("../../preflight/testdata/*/proc")
	require.NoError(t, err)
	require.NotEmpty(t, trees)
	for _, p := range trees {
		src, err := filepath.Abs(filepath.Dir(p))
		require.NoError(t, err)
		t.Run(filepath.Base(src), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "snap")
			r := ncclrun(t, "snapshot", "--root", src, "-o", out)
			require.Equal(t, 0, r.code, "stderr: %q", r.stderr)
			want := ncclrun(t, "doctor", "--json", "--root", src)
			got := ncclrun(t, "doctor", "--json", "--root", out)
			require.Equal(t, want.code, got.code)
			require.JSONEq(t, want.stdout, got.stdout)
		})
	}
}

// TestSnapshotPrivacy builds a source tree holding secrets where a careless
// copier would find them, and symlinks out of sys and proc, and checks that
// none of it reaches the snapshot.
func TestSnapshotPrivacy(t *testing.T) {
	src := writeTree(t, map[string]string{
		"proc/self/status":  "Name:\tncclrun\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nNoNewPrivs:\t0\nCapInh:\t0\nCapPrm:\t0\nCapEff:\t0\nCapBnd:\t0\nCapAmb:\t0\n",
		"proc/self/environ": "SECRET_TOKEN=proc-environ-secret",
		"etc/passwd":        "root:x:0:0:root:/root:/bin/sh\n",
		"etc/group":         "root:x:0:\n",
		"etc/shadow":        "root:SHADOWHASH:19000:0:99999:7:::\n",
		"var/run/secrets/kubernetes.io/serviceaccount/token":     "SA-TOKEN-VALUE",
		"var/run/secrets/kubernetes.io/serviceaccount/namespace": "default",
		"root/.ssh/id_rsa":             "PRIVATE-KEY",
		"root/.nccl.conf":              "NCCL_SOCKET_IFNAME=eth\nPASSWORD=conf-secret\n",
		"dev/infiniband/uverbs0":       "DEVICE-CONTENT",
		"dev/nvidia0":                  "DEVICE-CONTENT",
		"dev/sda":                      "DISK-CONTENT",
		"secret-outside/flags":         "OUTSIDE-SYS",
		"secret-outside/operstate":     "OUTSIDE-SYS",
		"sys/class/net/eth0/operstate": "up\n",
		"sys/class/infiniband/.keep":   "",
		// An HCA whose verbs node is dev/infiniband/uverbs0, so that
		// preflight looks at the device node (and the snapshot marks it).
		"sys/class/infiniband/mlx5_0/device/infiniband_verbs/uverbs0/.keep": "",
		"sys/module/other/parameters/x":                                     "MODULE-PARAM",
	})
	// A sysfs entry whose symlink leaves sys: never followed.
	require.NoError(t, os.Symlink("../../../secret-outside", filepath.Join(src, "sys/class/net/evil0")))
	// An attribute that is a symlink to the shadow file.
	require.NoError(t, os.MkdirAll(filepath.Join(src, "sys/class/net/evil1"), 0o755))
	require.NoError(t, os.Symlink("../../../../etc/shadow", filepath.Join(src, "sys/class/net/evil1/flags")))
	// A FIFO where a proc file is expected: never opened for reading (it
	// would block) nor recorded.
	require.NoError(t, os.MkdirAll(filepath.Join(src, "proc/1"), 0o755))
	require.NoError(t, syscall.Mkfifo(filepath.Join(src, "proc/1/cgroup"), 0o644))
	// NCCL_CONF_FILE aimed at the shadow file, as root.
	env := []string{"HOME=/root", "SECRET_TOKEN=env-secret", "NCCL_CONF_FILE=/etc/shadow",
		"NCCLRUN_ROOT=" + src, "KUBERNETES_SERVICE_HOST=10.0.0.1", "container=podman", "MY_API_KEY=env-secret"}
	out := filepath.Join(t.TempDir(), "snap")
	r := invocation{args: []string{"snapshot", "--output", out}, env: env}.run(t)
	require.Equal(t, 0, r.code, "stderr: %q", r.stderr)
	require.Len(t, r.errLines(), 1, "stderr: %q", r.stderr)

	requireTreeLacks(t, out, "SHADOWHASH", "SA-TOKEN-VALUE", "PRIVATE-KEY", "conf-secret", "env-secret",
		"proc-environ-secret", "DEVICE-CONTENT", "DISK-CONTENT", "OUTSIDE-SYS", "MODULE-PARAM")
	require.ElementsMatch(t, []string{"HOME=/root", "NCCL_CONF_FILE=/etc/shadow", "KUBERNETES_SERVICE_HOST=10.0.0.1", "container=podman"},
		snapEnv(t, out), "NCCLRUN_ROOT is left out: it would point doctor away from the snapshot")

	// NCCL_CONF_FILE's file is copied with its NCCL_ lines only: none here.
	b, err := os.ReadFile(filepath.Join(out, "etc/shadow"))
	require.NoError(t, err)
	require.Empty(t, b)
	for _, p := range []string{"proc/self/environ", "proc/1/cgroup", "root/.ssh", "dev/sda", "sys/module/other", "secret-outside",
		"var/run/secrets/kubernetes.io/serviceaccount/token", "sys/class/net/evil0/flags", "sys/class/net/evil1/flags"} {
		_, err := os.Lstat(filepath.Join(out, p))
		if !errors.Is(err, syscall.ENOTDIR) { // evil0, whose link leaves sys/, is an empty mark, not a directory
			require.ErrorIs(t, err, fs.ErrNotExist, "%s must not be in the snapshot", p)
		}
	}
	// What is there: the service account as an empty directory, device
	// nodes as empty files, ~/.nccl.conf with its NCCL_ line only.
	ents, err := os.ReadDir(filepath.Join(out, "var/run/secrets/kubernetes.io/serviceaccount"))
	require.NoError(t, err)
	require.Empty(t, ents)
	for _, p := range []string{"dev/infiniband/uverbs0", "dev/nvidia0"} {
		b, err := os.ReadFile(filepath.Join(out, p))
		require.NoError(t, err)
		require.Empty(t, b, p)
	}
	b, err = os.ReadFile(filepath.Join(out, "sys/class/net/eth0/operstate"))
	require.NoError(t, err)
	require.Equal(t, "up\n", string(b))

	// With NCCL_CONF_FILE unset, ~/.nccl.conf is found and filtered.
	env[2] = "NCCL_CONF_FILE="
	out2 := filepath.Join(t.TempDir(), "snap")
	r = invocation{args: []string{"snapshot", "--output", out2}, env: env}.run(t)
	require.Equal(t, 0, r.code, "stderr: %q", r.stderr)
	b, err = os.ReadFile(filepath.Join(out2, "root/.nccl.conf"))
	require.NoError(t, err)
	require.Equal(t, "NCCL_SOCKET_IFNAME=eth\n", string(b))
	requireTreeLacks(t, out2, "conf-secret", "SHADOWHASH")
}

// TestSnapshotOutputs: a tarball on stdout, a directory, and one-line usage
// errors for outputs that cannot be written.
func TestSnapshotOutputs(t *testing.T) {
	src, err := filepath.Abs("../../preflight/testdata/ib-node")
	require.NoError(t, err)

	t.Run("stdout", func(t *testing.T) {
		r := ncclrun(t, "snapshot", "--root", src, "-o", "-")
		require.Equal(t, 0, r.code, "stderr: %q", r.stderr)
		require.Len(t, r.errLines(), 1)
		require.Contains(t, r.stderr, "snapshot written to stdout")
		dir := extractTarGz(t, strings.NewReader(r.stdout))
		require.True(t, strings.HasPrefix(filepath.Base(dir), "ncclrun-snapshot-"), dir)
		require.FileExists(t, filepath.Join(dir, "proc/self/status"))
		require.FileExists(t, filepath.Join(dir, snapshot.ManifestFile))
	})
	t.Run("default name in the working directory", func(t *testing.T) {
		wd := t.TempDir()
		r := invocation{args: []string{"snapshot", "--root", src}, dir: wd}.run(t)
		require.Equal(t, 0, r.code, "stderr: %q", r.stderr)
		m, err := filepath.Glob(filepath.Join(wd, "ncclrun-snapshot-*-*.tar.gz"))
		require.NoError(t, err)
		require.Len(t, m, 1)
		f, err := os.Open(m[0])
		require.NoError(t, err)
		defer f.Close()
		dir := extractTarGz(t, f)
		require.Equal(t, strings.TrimSuffix(filepath.Base(m[0]), ".tar.gz"), filepath.Base(dir))
	})
	t.Run("empty existing directory", func(t *testing.T) {
		out := t.TempDir()
		r := ncclrun(t, "snapshot", "--root", src, "-o", out)
		require.Equal(t, 0, r.code, "stderr: %q", r.stderr)
		require.FileExists(t, filepath.Join(out, "sys/class/infiniband/mlx5_0/ports/1/state"))
	})
	t.Run("NCCLRUN_SNAPSHOT_OUTPUT", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "node.tar.gz")
		r := invocation{args: []string{"snapshot", "--root", src}, env: []string{"NCCLRUN_SNAPSHOT_OUTPUT=" + out}}.run(t)
		require.Equal(t, 0, r.code, "stderr: %q", r.stderr)
		require.FileExists(t, out)
	})

	base := t.TempDir()
	full := filepath.Join(base, "full")
	require.NoError(t, os.MkdirAll(full, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(full, "x"), nil, 0o644))
	plain := filepath.Join(base, "plain")
	require.NoError(t, os.WriteFile(plain, []byte("keep"), 0o644))
	for _, tc := range []struct{ name, out, contains string }{
		{"missing parent (tarball)", filepath.Join(base, "no/such/dir/s.tar.gz"), "no such file or directory"},
		{"missing parent (directory)", filepath.Join(base, "no/such/dir/s"), "no such file or directory"},
		{"directory not empty", full, "not empty"},
		{"existing file not a tarball name", plain, "not a directory"},
		{"unsupported archive", filepath.Join(base, "s.zip"), "FILE.tar.gz, FILE.tgz, - (stdout) or a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			requireUsage(t, ncclrun(t, "snapshot", "--root", src, "--output", tc.out), tc.contains)
		})
	}
	t.Run("tarball path is a directory", func(t *testing.T) {
		d := filepath.Join(base, "d.tar.gz")
		require.NoError(t, os.Mkdir(d, 0o755))
		requireUsage(t, ncclrun(t, "snapshot", "--root", src, "--output", d), "is a directory")
	})
	t.Run("argument", func(t *testing.T) {
		requireUsage(t, ncclrun(t, "snapshot", "out.tar.gz"), "snapshot takes no arguments")
	})
	b, err := os.ReadFile(plain)
	require.NoError(t, err)
	require.Equal(t, "keep", string(b), "a refused output is left alone")
	ents, err := os.ReadDir(full)
	require.NoError(t, err)
	require.Len(t, ents, 1)
}
