package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ncclrun/ncclrun/preflight"
)

// TestDoctorRootReadsProcEnviron: a hand-made tree of a
// Slurm node with SLURM_* only in proc/self/environ, no ncclrun-env, is a
// Slurm job to doctor --root, whatever the analyst's environment says.
func TestDoctorRootReadsProcEnviron(t *testing.T) {
	root := fakeTree(t, 1000, "65536", "65536", "0000000000000000")
	r := ncclrun(t, "doctor", "--json", "--root", root)
	require.Equal(t, "host", jpath(t, decodeJSON(t, r.stdout), "environment", "kind"), "control: no clue in the tree")

	require.NoError(t, os.WriteFile(filepath.Join(root, "proc/self/environ"),
		[]byte("PATH=/usr/bin\x00SLURM_JOB_ID=4242\x00SLURM_PROCID=3\x00"), 0o644))
	r = invocation{args: []string{"doctor", "--json", "--root", root}, env: []string{"container=podman"}}.run(t)
	doc := decodeJSON(t, r.stdout)
	require.Equal(t, "slurm", jpath(t, doc, "environment", "kind"), "stderr: %q", r.stderr)
	require.Equal(t, "SLURM_JOB_ID is set", jpath(t, doc, "environment", "reason"))
	require.NotContains(t, r.stdout, "podman", "the analyst's environment is not the node's")
	require.Empty(t, r.stderr)
}

// TestRootTreeUntrusted: doctor, env and run --root on a
// tree with a FIFO at proc/self/status and ncclrun-env linked to /dev/zero
// finish (a FIFO opened for reading blocks for ever; /dev/zero read whole
// fills memory) with one warning line per bad file, and run still runs CMD.
func TestRootTreeUntrusted(t *testing.T) {
	root := fakeTree(t, 1000, "65536", "65536", "0000000000000000")
	status := filepath.Join(root, "proc/self/status")
	require.NoError(t, os.Remove(status))
	require.NoError(t, syscall.Mkfifo(status, 0o644))
	require.NoError(t, os.Symlink("/dev/zero", filepath.Join(root, preflight.EnvFile)))
	for _, tc := range []struct {
		name string
		args []string
		code int
	}{
		{"doctor", []string{"doctor", "--root", root}, 0},
		{"doctor --json", []string{"doctor", "--json", "--root", root}, 0},
		{"env", []string{"env", "--root", root}, 0},
		{"run", []string{"--root", root, "--", "sh", "-c", "echo ran; exit 3"}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ncclrun(t, tc.args...)
			require.Equal(t, tc.code, r.code, "stderr: %q", r.stderr)
			var warns []string
			for _, l := range r.errLines() {
				if strings.HasPrefix(l, "ncclrun: warning: --root: ") {
					warns = append(warns, l)
				}
			}
			require.Equal(t, []string{
				`ncclrun: warning: --root: ncclrun-env: links to "/dev/zero", outside the tree; not read`,
				"ncclrun: warning: --root: proc/self/status: not a regular file (a FIFO); not read",
			}, warns, "stderr: %q", r.stderr)
			if tc.name == "run" {
				require.Equal(t, "ran\n", r.stdout)
			}
		})
	}
}
