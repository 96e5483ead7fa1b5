package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSnapshotMessagePrintable: the line saying where the snapshot went
// quotes an --output name with an escape sequence or invalid UTF-8 as
// printable text; the snapshot itself is written under the name given.
func TestSnapshotMessagePrintable(t *testing.T) {
	tree := writeTree(t, map[string]string{"proc/self/status": "Name:\tncclrun\nUid:\t0\t0\t0\t0\n"})
	for _, tc := range []struct{ name, base, want string }{
		{"escape in a directory", "snap\x1b]0;x\x07", `snap\x1b]0;x\x07`},
		{"escape in a tarball", "snap\x1b[2J.tar.gz", `snap\x1b[2J.tar.gz`},
		{"invalid UTF-8", "snap\xff", "snap\uFFFD"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), tc.base)
			r := ncclrun(t, "snapshot", "--root", tree, "-o", out)
			require.Equal(t, 0, r.code, r.stderr)
			_, err := os.Stat(out)
			require.NoError(t, err, "written under the name given")
			assert.Contains(t, r.stderr, tc.want)
			assert.False(t, strings.ContainsAny(r.stderr, "\x1b\x07"), "stderr %q", r.stderr)
			assert.NotContains(t, r.stderr, "\xff")
		})
	}
}

// TestStrictMessagePrintable: --strict's line naming the CMD it did not
// start quotes a CMD path with an escape sequence as printable text.
func TestStrictMessagePrintable(t *testing.T) {
	dir := t.TempDir()
	root := fakeTree(t, 1000, "65536", "65536", "0000000000000000") // memlock fails
	for _, tc := range []struct{ name, base, want string }{
		{"escape", "t\x1b[2J", `t\x1b[2J`},
		{"invalid UTF-8", "t\xff", "t\uFFFD"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := filepath.Join(dir, tc.base)
			require.NoError(t, os.Symlink("/bin/true", cmd))
			r := ncclrun(t, "--strict", "--root", root, "--", cmd)
			require.Equal(t, ExitStrict, r.code, r.stderr)
			assert.Contains(t, r.stderr, tc.want+" not started")
			assert.NotContains(t, r.stderr, "\x1b")
			assert.NotContains(t, r.stderr, "\xff")
		})
	}
}
