package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRootTreePrintable: a tree under --root may be anyone's snapshot; a
// name in it with an escape sequence (an RDMA device's here, whose port
// state is a FIFO) shows as escapes in everything doctor and env print:
// the table, the warning that the FIFO was not read, env's reasons.
func TestRootTreePrintable(t *testing.T) {
	const evil = "ev\x1b]0;pwned\x07il"
	root := sanityTree(t)
	ib := filepath.Join(root, "sys/class/infiniband")
	require.NoError(t, os.Rename(filepath.Join(ib, "mlx5_0"), filepath.Join(ib, evil)))
	state := filepath.Join(ib, evil, "ports/1/state")
	require.NoError(t, os.Remove(state))
	require.NoError(t, syscall.Mkfifo(state, 0o644))
	for _, args := range [][]string{{"doctor"}, {"env"}} {
		t.Run(args[0], func(t *testing.T) {
			r := ncclrun(t, append(args, "--root", root)...)
			out := r.stdout + r.stderr
			assert.Contains(t, out, `ev\x1b]0;pwned\x07il`)
			assert.NotContains(t, out, "\x1b", "stdout: %q\nstderr: %q", r.stdout, r.stderr)
			assert.NotContains(t, out, "\x07")
		})
	}
}
