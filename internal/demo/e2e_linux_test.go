//go:build linux

package demo

import (
	"bytes"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ncclrun/ncclrun/internal/testutil"
)

// TestDemoAsUserFileCap runs the demo as uid 1000 from a binary with
// cap_ipc_lock+p and IPC_LOCK in the bounding set, the state of
// Dockerfile.base's image under `docker run --user 1000 --cap-add IPC_LOCK`:
// the capability fix must work, which it does only when the fake job is not
// the file carrying the capability.
func TestDemoAsUserFileCap(t *testing.T) {
	testutil.RequireRoot(t)
	setpriv := testutil.RequireTool(t, "setpriv")
	bin := buildNcclrun(t)
	setFileCap(t, bin)
	cmd := exec.Command(setpriv, "--reuid=1000", "--regid=1000", "--clear-groups",
		"--inh-caps=-all", "--bounding-set=-all,+ipc_lock", "--", bin, "demo")
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/"}
	cmd.Dir = "/"
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	t.Logf("stdout:\n%s\nstderr:\n%s", out.String(), errb.String())
	require.NoError(t, err)
	assert.Contains(t, out.String(), "the fake job runs from a copy of ncclrun without them")
	assert.Contains(t, out.String(), "[2/2] With the fix: keep CAP_IPC_LOCK")
	assert.Contains(t, out.String(), "Demo OK")
}
