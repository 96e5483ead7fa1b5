package safefile

import (
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ncclrun/ncclrun/internal/testutil"
)

// tree makes a directory with a regular file, links to it and to /dev/zero,
// a linked directory, a FIFO and a subdirectory.
func tree(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(d, "file"), []byte("a\nb\n"), 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(d, "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(d, "sub", "file"), []byte("in sub\n"), 0o644))
	require.NoError(t, os.Symlink(filepath.Join(d, "file"), filepath.Join(d, "link")))
	require.NoError(t, os.Symlink("/dev/zero", filepath.Join(d, "zero")))
	require.NoError(t, os.Symlink(filepath.Join(d, "sub"), filepath.Join(d, "linkdir")))
	require.NoError(t, unix.Mkfifo(filepath.Join(d, "fifo"), 0o644))
	return d
}

func TestOpen(t *testing.T) {
	for _, walk := range []bool{false, true} {
		name := "openat2"
		if walk {
			name = "walk"
		}
		t.Run(name, func(t *testing.T) {
			defer noOpenat2.Store(noOpenat2.Load())
			noOpenat2.Store(walk)
			d := tree(t)
			for _, tc := range []struct {
				path    string
				content string
				err     error
			}{
				{path: "file", content: "a\nb\n"},
				{path: "sub/file", content: "in sub\n"},
				{path: "link", err: ErrSymlink},
				{path: "zero", err: ErrSymlink},
				{path: "linkdir/file", err: ErrSymlink},
				{path: "fifo", err: ErrNotRegular}, // and it did not block
				{path: "sub", err: ErrNotRegular},
				{path: "missing", err: os.ErrNotExist},
			} {
				f, err := Open(filepath.Join(d, tc.path))
				if tc.err != nil {
					assert.ErrorIs(t, err, tc.err, tc.path)
					continue
				}
				require.NoError(t, err, tc.path)
				b, err := io.ReadAll(f)
				f.Close()
				require.NoError(t, err)
				assert.Equal(t, tc.content, string(b), tc.path)
			}
		})
	}
}

// TestOpenFollow: links are followed, as execve follows them, and still
// only a regular file is opened.
func TestOpenFollow(t *testing.T) {
	d := tree(t)
	for _, tc := range []struct {
		path    string
		content string
		err     error
	}{
		{path: "file", content: "a\nb\n"},
		{path: "link", content: "a\nb\n"},
		{path: "linkdir/file", content: "in sub\n"},
		{path: "fifo", err: ErrNotRegular}, // and it did not block
		{path: "sub", err: ErrNotRegular},
		{path: "missing", err: os.ErrNotExist},
	} {
		f, err := OpenFollow(filepath.Join(d, tc.path))
		if tc.err != nil {
			assert.ErrorIs(t, err, tc.err, tc.path)
			continue
		}
		require.NoError(t, err, tc.path)
		b, err := io.ReadAll(f)
		f.Close()
		require.NoError(t, err)
		assert.Equal(t, tc.content, string(b), tc.path)
	}
}

func TestTailOfHugeSparseFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "sparse")
	f, err := os.Create(p)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(200<<30)) // 200 GiB, no blocks
	_, err = f.WriteAt([]byte("\ncut line\nlast line\n"), 200<<30)
	require.NoError(t, err)
	f.Close()
	g, err := Open(p)
	require.NoError(t, err)
	defer g.Close()
	r, err := Tail(g, 15)
	require.NoError(t, err)
	b, err := io.ReadAll(r)
	require.NoError(t, err)
	assert.Equal(t, "last line\n", string(b))

	small := filepath.Join(t.TempDir(), "small")
	require.NoError(t, os.WriteFile(small, []byte("x\ny\n"), 0o644))
	h, err := Open(small)
	require.NoError(t, err)
	defer h.Close()
	r, err = Tail(h, 100)
	require.NoError(t, err)
	b, err = io.ReadAll(r)
	require.NoError(t, err)
	assert.Equal(t, "x\ny\n", string(b), "a file under the bound is read whole")
}

// Promise: As opens with the credentials given: root reading for uid 1000
// cannot read a 0600 root file, directly or through any path.
func TestAsUsesTheCredentials(t *testing.T) {
	testutil.RequireRoot(t)
	d, err := os.MkdirTemp("", "safefile-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(d) })
	require.NoError(t, os.Chmod(d, 0o755)) // uid 1000 may enter
	secret := filepath.Join(d, "secret")
	require.NoError(t, os.WriteFile(secret, []byte("TOPSECRET\n"), 0o600))
	mine := filepath.Join(d, "mine")
	require.NoError(t, os.WriteFile(mine, []byte("ok\n"), 0o600))
	require.NoError(t, os.Chown(mine, 1000, 1000))
	read := func(cred *Cred, p string) (string, error) {
		var s string
		err := <-As(cred, func() error {
			f, err := Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			b, err := io.ReadAll(f)
			s = string(b)
			return err
		})
		return s, err
	}
	u := &Cred{UID: 1000, GID: 1000, Groups: []uint32{}}
	_, err = read(u, secret)
	assert.ErrorIs(t, err, os.ErrPermission)
	s, err := read(u, mine)
	require.NoError(t, err)
	assert.Equal(t, "ok\n", s)
	s, err = read(nil, secret)
	require.NoError(t, err, "ncclrun's own credentials")
	assert.Equal(t, "TOPSECRET\n", s)
	// The process's own credentials are untouched.
	assert.Equal(t, 0, os.Geteuid())
	_, err = os.ReadFile(secret)
	assert.NoError(t, err)
}

func TestWriteFile(t *testing.T) {
	for _, walk := range []bool{false, true} {
		t.Run(map[bool]string{false: "openat2", true: "walk"}[walk], func(t *testing.T) {
			defer noOpenat2.Store(noOpenat2.Load())
			noOpenat2.Store(walk)
			d := tree(t)
			// A link at the target is neither followed nor replaced.
			assert.ErrorIs(t, WriteFile(filepath.Join(d, "link"), []byte("new\n"), 0o644), ErrLinkKept)
			assert.Equal(t, "a\nb\n", mustRead(t, filepath.Join(d, "file")), "the link's target was written")
			fi, err := os.Lstat(filepath.Join(d, "link"))
			require.NoError(t, err)
			assert.Equal(t, os.ModeSymlink, fi.Mode().Type(), "the link was replaced")
			// A new file is written with perm.
			require.NoError(t, WriteFile(filepath.Join(d, "new"), []byte("new\n"), 0o644))
			fi, err = os.Lstat(filepath.Join(d, "new"))
			require.NoError(t, err)
			assert.True(t, fi.Mode().IsRegular())
			assert.Equal(t, os.FileMode(0o644), fi.Mode().Perm())
			assert.Equal(t, "new\n", mustRead(t, filepath.Join(d, "new")))
			// A FIFO or a directory at the target is left alone, never
			// opened (which would block) nor replaced.
			for _, p := range []string{"fifo", "sub"} {
				assert.ErrorIs(t, WriteFile(filepath.Join(d, p), []byte("x"), 0o644), ErrNotRegular, p)
			}
			fi, err = os.Lstat(filepath.Join(d, "fifo"))
			require.NoError(t, err)
			assert.Equal(t, os.ModeNamedPipe, fi.Mode().Type())
			// A linked directory is refused.
			err = WriteFile(filepath.Join(d, "linkdir", "report.json"), []byte("x"), 0o644)
			assert.ErrorIs(t, err, ErrSymlink)
			assert.NoFileExists(t, filepath.Join(d, "sub", "report.json"))
			// A missing directory: the error names the file asked for,
			// not only the directory (which --report alone would say).
			missing := filepath.Join(d, "nodir", "report.json")
			err = WriteFile(missing, []byte("x"), 0o644)
			assert.ErrorIs(t, err, os.ErrNotExist)
			assert.Contains(t, err.Error(), strconv.Quote(missing))
			// No temporary file is left behind.
			es, err := os.ReadDir(d)
			require.NoError(t, err)
			for _, e := range es {
				assert.False(t, strings.HasPrefix(e.Name(), "."), "left %s", e.Name())
			}
		})
	}
}

func mustRead(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	return string(b)
}
