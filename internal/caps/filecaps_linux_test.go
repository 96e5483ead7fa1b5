package caps_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
	testutil.SetIPCLockFileCap(t, p)
	has, err = caps.FileCaps(p)
	require.NoError(t, err)
	assert.True(t, has)
}
