//go:build linux

package demo

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ncclrun/ncclrun/internal/caps"
	"github.com/ncclrun/ncclrun/internal/testutil"
)

func TestIsIdentityMap(t *testing.T) {
	assert.True(t, isIdentityMap("         0          0 4294967295\n"))
	assert.False(t, isIdentityMap("         0       1000          1\n"))
	assert.False(t, isIdentityMap(""))
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
	testutil.SetIPCLockFileCap(t, src)
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
