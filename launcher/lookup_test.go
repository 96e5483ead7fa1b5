package launcher

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLookCommand: PATH entries that do not exist (or are not
// directories) are skipped, the first executable wins, and a file without
// execute permission or a directory found before none is "not executable".
func TestLookCommand(t *testing.T) {
	root := t.TempDir()
	mk := func(rel string, mode os.FileMode) {
		p := filepath.Join(root, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte("#!/bin/sh\n"), mode))
	}
	mk("bin/tool", 0o755)
	mk("noexec/tool", 0o644)
	mk("file", 0o644)
	require.NoError(t, os.MkdirAll(filepath.Join(root, "dir/tool"), 0o755))
	d := func(rel string) string { return filepath.Join(root, rel) }
	join := func(dirs ...string) string { return strings.Join(dirs, string(os.PathListSeparator)) }
	for _, tc := range []struct {
		name, path string
		want       string
		err        error
	}{
		{"found after missing entries", join(d("missing"), d("file"), d("bin")), d("bin/tool"), nil},
		{"first executable wins", join(d("noexec"), d("bin")), d("bin/tool"), nil},
		{"only without execute bit", join(d("missing"), d("noexec")), "", ErrNotExecutable},
		{"only a directory", join(d("dir")), "", ErrNotExecutable},
		{"nowhere", join(d("missing"), d("file")), "", ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := lookCommand("tool", tc.path)
			if tc.err != nil {
				require.Error(t, err)
				assert.True(t, errors.Is(err, tc.err), "%v", err)
				var se *StartError
				assert.True(t, errors.As(err, &se))
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// BenchmarkLookCommand: a command in the last of 11 PATH directories, as
// `true` is on a typical image (every start looks its command up).
func BenchmarkLookCommand(b *testing.B) {
	root := b.TempDir()
	var dirs []string
	for i := 0; i < 10; i++ {
		dirs = append(dirs, filepath.Join(root, "missing", string(rune('a'+i))))
	}
	bin := filepath.Join(root, "bin")
	require.NoError(b, os.MkdirAll(bin, 0o755))
	require.NoError(b, os.WriteFile(filepath.Join(bin, "tool"), nil, 0o755))
	path := strings.Join(append(dirs, bin), string(os.PathListSeparator))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := lookCommand("tool", path); err != nil {
			b.Fatal(err)
		}
	}
}
