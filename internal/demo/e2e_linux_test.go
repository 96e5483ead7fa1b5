//go:build linux

package demo

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/ncclrun/ncclrun/internal/testutil"
)

// TestDemoAsUserFileCap runs the demo as uid 1000 from a binary with
// cap_ipc_lock+p and IPC_LOCK in the bounding set, the state of
// Dockerfile.base's image under `docker run --user 1000 --cap-add IPC_LOCK`:
// the capability fix must work, which it does only when the fake job is not
// the file carrying the capability.
func TestDemoAsUserFileCap(t *testing.T) {
	testutil.RequireRoot(t)
	bin := buildNcclrun(t)
	testutil.SetIPCLockFileCap(t, bin)
	out := demoAsUser(t, bin, "-all,+ipc_lock", "/")
	assert.Contains(t, out, "the fake job runs from a copy of ncclrun without them")
	assert.Contains(t, out, "[2/2] With the fix: keep CAP_IPC_LOCK")
	assert.Contains(t, out, "Demo OK")
}
