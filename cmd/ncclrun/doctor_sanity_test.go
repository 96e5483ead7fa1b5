package main

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sanityTree is preflight's ib-node tree, its ports made RoCE, with every
// env-sanity trap laid over it.
func sanityTree(t *testing.T) string {
	t.Helper()
	src, dst := "../../preflight/testdata/ib-node", t.TempDir()
	require.NoError(t, filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	}))
	files := map[string]string{
		"proc/self/limits": "Limit                     Soft Limit           Hard Limit           Units     \n" +
			"Max stack size            unlimited            unlimited            bytes     \n" +
			"Max locked memory         unlimited            unlimited            bytes     \n",
		"usr/lib/x86_64-linux-gnu/libnccl.so.2.27.3": "",
		"etc/systemd/logind.conf":                    "[Login]\nRemoveIPC=yes\n",
	}
	for _, d := range []string{"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"} {
		// RoCE ports, where NCCL uses the GID index, with a GID at 0 only.
		files["sys/class/infiniband/"+d+"/ports/1/link_layer"] = "Ethernet\n"
		files["sys/class/infiniband/"+d+"/ports/1/gids/0"] = "fe80:0000:0000:0000:0a00:27ff:fe4e:1a2b\n"
	}
	for rel, content := range files {
		p := filepath.Join(dst, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	return dst
}

// TestDoctorEnvSanity: doctor --root shows every env-sanity warning with
// its variable, and a snapshot of the tree gives doctor the same answer.
func TestDoctorEnvSanity(t *testing.T) {
	tree := sanityTree(t)
	env := []string{"NCCL_IB_GID_INDEX=3", "NCCL_DEBUG_FILE=/tmp/nccl.log", "NCCL_TOPO_FILE=/etc/nccl/topo.xml",
		"NCCL_SOCKET_IFNAME=ib", "GLOO_SOCKET_IFNAME=eth0"}
	doctor := func(root string) map[string]any {
		r := invocation{args: []string{"doctor", "--json", "--root", root, "--user", "trainer"}, env: env}.run(t)
		var doc map[string]any
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &doc), r.stdout+r.stderr)
		return check(t, doc, "env-sanity")
	}
	c := doctor(tree)
	assert.Equal(t, "warn", c["status"])
	var vars []string
	for _, p := range jpath(t, c, "details", "problems").([]any) {
		vars = append(vars, p.(map[string]any)["variable"].(string))
	}
	assert.Equal(t, []string{"RLIMIT_STACK", "NCCL_DEBUG_FILE", "NCCL_TOPO_FILE", "NCCL_IB_GID_INDEX", "RemoveIPC", "GLOO_SOCKET_IFNAME"}, vars)
	assert.Equal(t, "2.27.3", jpath(t, c, "details", "nccl_version"))
	assert.Contains(t, c["summary"], "NCCL 2.27.3 (before 2.28)")

	out := filepath.Join(t.TempDir(), "snap")
	r := invocation{args: []string{"snapshot", "--root", tree, "-o", out}, env: env}.run(t)
	require.Equal(t, 0, r.code, r.stderr)
	s := doctor(out)
	assert.Equal(t, c["summary"], s["summary"])
	assert.Equal(t, c["fix"], s["fix"])
}
