package caps_test

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

// TestFileCaps: a plain file carries none, `setcap cap_ipc_lock+p` one
// (setting it needs CAP_SETFCAP), and a missing file is an error.
func TestFileCaps(t *testing.T) {
	p := filepath.Join(t.TempDir(), "bin")
	require.NoError(t, os.WriteFile(p, []byte("x"), 0o755))
	has, err := caps.FileCaps(p)
	require.NoError(t, err)
	assert.False(t, has)

	_, err = caps.FileCaps(filepath.Join(t.TempDir(), "none"))
	assert.ErrorIs(t, err, os.ErrNotExist)

	testutil.RequireRoot(t)
	ipcLockP := []byte{0, 0, 0, 2, 0, 0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0} // revision 2, permitted 1<<14
	if err := unix.Setxattr(p, "security.capability", ipcLockP, 0); errors.Is(err, unix.ENOTSUP) {
		testutil.SkipOrFail(t, "no extended attributes here: %v", err)
	} else {
		require.NoError(t, err)
	}
	has, err = caps.FileCaps(p)
	require.NoError(t, err)
	assert.True(t, has)
}
