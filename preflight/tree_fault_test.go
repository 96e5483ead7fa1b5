package preflight

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// Fault injection on the snapshot trees: every file of every testdata tree
// is in turn missing, empty, garbled, a directory, 1 MiB long or a
// symlink loop.
// Preflight must still return all its checks with a valid status and
// serialisable details, and never panic (a panic fails the test).

// faults are the ways one file of a snapshot is damaged.
var faults = map[string]func(t *testing.T, p string){
	"missing": func(t *testing.T, p string) { require.NoError(t, os.Remove(p)) },
	"empty":   func(t *testing.T, p string) { require.NoError(t, os.WriteFile(p, nil, 0o644)) },
	"garbled": func(t *testing.T, p string) {
		require.NoError(t, os.WriteFile(p, []byte("\x00\xff:\t-1 ((( 0x\n\n:::\xfe 99999999999999999999999 ?"), 0o644))
	},
	"directory": func(t *testing.T, p string) {
		require.NoError(t, os.Remove(p))
		require.NoError(t, os.Mkdir(p, 0o755))
	},
	"huge": func(t *testing.T, p string) {
		require.NoError(t, os.WriteFile(p, []byte(strings.Repeat("7", 1<<20)), 0o644))
	},
	// A tree is untrusted. A FIFO would block a reader
	// for ever, /dev/zero would fill memory: neither is opened.
	"fifo": func(t *testing.T, p string) {
		require.NoError(t, os.Remove(p))
		require.NoError(t, syscall.Mkfifo(p, 0o644))
	},
	"link to /dev/zero": func(t *testing.T, p string) {
		require.NoError(t, os.Remove(p))
		require.NoError(t, os.Symlink("/dev/zero", p))
	},
	"symlink loop": func(t *testing.T, p string) {
		require.NoError(t, os.Remove(p))
		require.NoError(t, os.Symlink(filepath.Base(p), p))
	},
}

func TestPreflightSurvivesDamagedSnapshots(t *testing.T) {
	trees, err := filepath.Glob("testdata/*")
	require.NoError(t, err)
	ran := 0
	for _, tree := range trees {
		if st, err := os.Stat(tree); err != nil || !st.IsDir() {
			continue
		}
		var files []string
		require.NoError(t, filepath.WalkDir(tree, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				rel, _ := filepath.Rel(tree, p)
				files = append(files, rel)
			}
			return err
		}))
		root := copyTree(t, tree)
		for _, rel := range files {
			p := filepath.Join(root, rel)
			orig, err := os.ReadFile(p)
			require.NoError(t, err)
			for name, damage := range faults {
				ran++
				damage(t, p)
				what := filepath.Base(tree) + "/" + rel + " " + name
				requireWellFormed(t, runNoPanic(t, root, what), what)
				require.NoError(t, os.RemoveAll(p))
				require.NoError(t, os.WriteFile(p, orig, 0o644))
			}
		}
	}
	require.Positive(t, ran, "no snapshot trees found")
}

// An empty root and a root that does not exist: every check still answers.
func TestPreflightOnEmptyAndMissingRoot(t *testing.T) {
	for name, root := range map[string]string{"empty": t.TempDir(), "missing": filepath.Join(t.TempDir(), "nope")} {
		rep := runNoPanic(t, root, name)
		requireWellFormed(t, rep, name)
	}
}

func runNoPanic(t *testing.T, root, what string) (rep Report) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("%s: preflight panicked: %v", what, r)
		}
	}()
	env := []string{"NCCL_IB_HCA=^=mlx5_0:1,,", "NCCL_SOCKET_IFNAME==eth0,^lo", "NCCL_CONF_FILE=" + filepath.Join(root, "etc/nccl.conf")}
	return Run(context.Background(), Options{Root: root, Env: env, Probe: 1 << 20, Prober: func(int64) error {
		t.Errorf("%s: a probe must not run on a snapshot", what)
		return nil
	}})
}

func requireWellFormed(t *testing.T, rep Report, what string) {
	t.Helper()
	want := []string{IDEnvironment, IDMemlock, IDCapabilities, IDRDMA, IDShm, IDGPU, IDGPUDirect, IDNetwork, IDEnvSanity}
	var got []string
	for _, c := range rep.Checks {
		got = append(got, c.ID)
		switch c.Status {
		case OK, Warn, Fail, Skip:
		default:
			t.Errorf("%s: check %s has status %q", what, c.ID, c.Status)
		}
		if c.Summary == "" {
			t.Errorf("%s: check %s has no summary", what, c.ID)
		}
	}
	require.Equal(t, want, got, what)
	_, err := json.Marshal(rep)
	require.NoError(t, err, "%s: report must serialise", what)
	require.Contains(t, []Platform{Kubernetes, Docker, Slurm, Host}, rep.Environment.Kind, what)
}

// copyTree copies a snapshot (regular files, directories, symlinks).
func copyTree(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	require.NoError(t, filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		out := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(out, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(l, out)
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(out, b, 0o644)
		}
	}))
	return dst
}
