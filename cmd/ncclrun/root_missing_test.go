package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRootNotADirectory: a --root that is not a directory (a typo, the
// snapshot's tarball not yet extracted) is a usage error naming it, never
// the verdict of an empty tree: doctor would otherwise pass a node it
// never read.
func TestRootNotADirectory(t *testing.T) {
	dir := t.TempDir()
	tarball := filepath.Join(dir, "snap.tar.gz")
	require.NoError(t, os.WriteFile(tarball, []byte("\x1f\x8b"), 0o644))
	missing := filepath.Join(dir, "nonexistent")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"doctor, missing", []string{"doctor", "--root", missing}, `--root "` + missing + `" is not a directory`},
		{"global flag, missing", []string{"--root", missing, "doctor", "--json"}, "is not a directory"},
		{"env, missing", []string{"env", "--root", missing}, "is not a directory"},
		{"doctor, tarball", []string{"doctor", "--root", tarball}, "tar xzf"},
		{"run, missing", []string{"--root", missing, "run", "--", "true"}, "is not a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			requireUsage(t, ncclrun(t, tc.args...), tc.want)
		})
	}
}
