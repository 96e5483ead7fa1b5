//go:build linux

package demo

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ncclrun/ncclrun/internal/caps"
	"github.com/ncclrun/ncclrun/internal/testutil"
)

// capIPCLockP is the security.capability value of `setcap cap_ipc_lock+p`:
// vfs_cap_data revision 2, no effective flag, permitted = 1<<CAP_IPC_LOCK.
var capIPCLockP = []byte{0, 0, 0, 2, 0, 0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}

func TestIsIdentityMap(t *testing.T) {
	assert.True(t, isIdentityMap("         0          0 4294967295\n"))
	assert.False(t, isIdentityMap("         0       1000          1\n"))
	assert.False(t, isIdentityMap(""))
}

// setFileCap gives path cap_ipc_lock+p; a file system without xattrs
// skips the test (fails it under CI=true).
func setFileCap(t *testing.T, path string) {
	t.Helper()
	err := unix.Setxattr(path, "security.capability", capIPCLockP, 0)
	if errors.Is(err, unix.ENOTSUP) {
		testutil.SkipOrFail(t, "the temporary directory's file system has no xattrs: %v", err)
	}
	require.NoError(t, err, "setcap cap_ipc_lock+p %s", path)
}

// TestCopyWithoutFileCaps gives a copy of the test binary cap_ipc_lock+p
// (as Dockerfile.base gives ncclrun) and checks that fileCaps sees it and
// that the demo's copy of it has none and runs.
func TestCopyWithoutFileCaps(t *testing.T) {
	testutil.RequireRoot(t) // setting security.capability needs CAP_SETFCAP
	self, err := os.Executable()
	require.NoError(t, err)
	data, err := os.ReadFile(self)
	require.NoError(t, err)
	src := filepath.Join(t.TempDir(), "ncclrun")
	require.NoError(t, os.WriteFile(src, data, 0o755))
	has, err := caps.FileCaps(src)
	require.NoError(t, err)
	assert.False(t, has, "a plain file")
	setFileCap(t, src)
	has, err = caps.FileCaps(src)
	require.NoError(t, err)
	require.True(t, has, "after setcap")

	t.Setenv(fakeEnv, "good") // the copy's `version` is answered by fakeNcclrun
	dir := t.TempDir()
	dst, err := copyWithoutFileCaps(src, dir)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "ncclrun"), dst)
	has, err = caps.FileCaps(dst)
	require.NoError(t, err)
	assert.False(t, has, "the copy carries no file capabilities")

	_, err = copyWithoutFileCaps(filepath.Join(t.TempDir(), "nope"), t.TempDir())
	assert.ErrorIs(t, err, os.ErrNotExist)
}
