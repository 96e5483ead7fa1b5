package preflight

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTreeEnvironment: under a tree root preflight reads the environment
// the tree recorded (ncclrun-env), else proc/self/environ (NUL-separated),
// else the caller's; never the caller's when the tree has one.
func TestTreeEnvironment(t *testing.T) {
	caller := []string{"KUBERNETES_SERVICE_HOST=10.0.0.1"}
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  Platform
	}{
		{"proc/self/environ only", map[string]string{
			"proc/self/environ": "PATH=/bin\x00SLURM_JOB_ID=4242\x00SLURM_PROCID=0\x00",
		}, "slurm"},
		{"ncclrun-env wins over proc/self/environ", map[string]string{
			EnvFile:             "container=podman\n",
			"proc/self/environ": "SLURM_JOB_ID=4242\x00",
		}, "docker"},
		{"empty ncclrun-env still replaces the caller's", map[string]string{EnvFile: ""}, "host"},
		{"neither: the caller's", nil, "kubernetes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := overlay(t, "ib-node", tc.files)
			r := Run(context.Background(), Options{Root: root, Env: caller})
			assert.Equal(t, tc.want, r.Environment.Kind, "%+v", r.Environment)
			assert.Empty(t, r.Warnings)
		})
	}
}

// TestTreeUntrusted: a tree someone sent in may hold a
// FIFO where a file is expected, a link to /dev/zero or out of the tree, a
// huge file. Run finishes, reads none of them (or a bounded part), and
// says so once per file.
func TestTreeUntrusted(t *testing.T) {
	root := overlay(t, "ib-node", map[string]string{"etc/secret": "SECRET"})
	replace := func(rel string, make func(p string) error) {
		p := filepath.Join(root, filepath.FromSlash(rel))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		_ = os.RemoveAll(p)
		require.NoError(t, make(p))
	}
	replace("proc/self/status", func(p string) error { return syscall.Mkfifo(p, 0o644) })
	replace(EnvFile, func(p string) error { return os.Symlink("/dev/zero", p) })
	replace("proc/1/cgroup", func(p string) error { return os.Symlink("../../etc/secret", p) })
	replace("proc/self/limits", func(p string) error {
		return os.WriteFile(p, []byte(strings.Repeat("Max locked memory 65536 65536 bytes\n", maxFile/36+10)), 0o644)
	})
	done := make(chan Report, 1)
	go func() { done <- Run(context.Background(), Options{Root: root, Env: []string{}}) }()
	r := <-done // a FIFO opened for reading would block here for ever (the test's -timeout)
	require.Len(t, r.Checks, 9)
	byPath := map[string]string{}
	for _, w := range r.Warnings {
		rel, _, _ := strings.Cut(w, ": ")
		_, dup := byPath[rel]
		assert.False(t, dup, "one warning per file: %q", r.Warnings)
		byPath[rel] = w
	}
	assert.Contains(t, byPath["proc/self/status"], "not a regular file (a FIFO); not read")
	assert.Contains(t, byPath[EnvFile], `links to "/dev/zero", outside the tree; not read`)
	assert.Contains(t, byPath["proc/1/cgroup"], "outside the tree; not read", "proc/ links stay in proc/")
	assert.Contains(t, byPath["proc/self/limits"], "only the first 4194304 read")
	assert.Len(t, r.Warnings, 4, "%q", r.Warnings)
	c, _ := r.Check(IDCapabilities)
	assert.NotEqual(t, OK, c.Status, "no credentials were read")
	assert.Equal(t, Host, r.Environment.Kind, "the caller's empty environment, not /dev/zero")
}

// TestTreeLinksInside: links that stay inside the tree (as sysfs's class
// links do) are followed; absolute links are not re-rooted but refused.
func TestTreeLinksInside(t *testing.T) {
	root := overlay(t, "ib-node", nil)
	dev := filepath.Join(root, "sys/devices/pci0/net/eth9")
	require.NoError(t, os.MkdirAll(dev, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dev, "operstate"), []byte("up\n"), 0o644))
	require.NoError(t, os.Symlink("../../devices/pci0/net/eth9", filepath.Join(root, "sys/class/net/eth9")))
	s := newRoot(root)
	v, err := s.readAttr("sys/class/net/eth9/operstate")
	require.NoError(t, err)
	assert.Equal(t, "up", v)
	require.NoError(t, os.Symlink("/etc/hostname", filepath.Join(root, "sys/class/net/abs0")))
	_, err = s.readAttr("sys/class/net/abs0")
	assert.ErrorIs(t, err, ErrOutside)
	assert.Empty(t, newRoot("/").t, "the live system is read plainly")
}

// TestTreeDotDotLinks: relative links that climb out of the tree with ..
// are refused, whether the file itself is the link or a directory on its
// path is, and nothing outside the tree is read.
func TestTreeDotDotLinks(t *testing.T) {
	outer := t.TempDir()
	root := filepath.Join(outer, "tree")
	require.NoError(t, os.MkdirAll(filepath.Join(root, "sys/class"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(outer, "sv-outside"), []byte("SLURM_JOB_ID=1\n"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(outer, "sv-etc"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(outer, "sv-etc/passwd"), []byte("root:x:0:0::/root:/bin/sh\n"), 0o644))
	require.NoError(t, os.Symlink("../sv-outside", filepath.Join(root, EnvFile)))
	require.NoError(t, os.Symlink("../sv-etc", filepath.Join(root, "etc")))
	require.NoError(t, os.Symlink("../../../sv-etc", filepath.Join(root, "sys/class/net")))

	s := newRoot(root)
	_, err := s.readFile(EnvFile)
	require.ErrorIs(t, err, ErrOutside)
	assert.Contains(t, err.Error(), `links to "../sv-outside", outside the tree`)
	_, err = s.readFile("etc/passwd")
	assert.ErrorIs(t, err, ErrOutside, "a directory on the path links out")
	_, err = s.list("sys/class/net")
	assert.ErrorIs(t, err, ErrOutside)
	assert.False(t, s.exists("etc/passwd"))
	_, err = s.statfsSize("etc/passwd")
	assert.ErrorIs(t, err, ErrOutside)

	r := Run(context.Background(), Options{Root: root, Env: []string{}})
	assert.Equal(t, Host, r.Environment.Kind, "the file outside the tree was not read")
	assert.Contains(t, strings.Join(r.Warnings, "\n"), EnvFile+`: links to "../sv-outside", outside the tree; not read`)
}
