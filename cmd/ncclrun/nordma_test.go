package main

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ncclrun/ncclrun/internal/testutil"
)

// TestNoRDMAMemlockNotJudged: on a node without any RDMA
// device NCCL uses sockets and registers no memory, so a healthy run as a
// user without CAP_IPC_LOCK under a small limit prints no memlock failure
// and --strict starts the command; doctor says why memlock is not judged.
// --min-memlock asks for the verdict anyway.
func TestNoRDMAMemlockNotJudged(t *testing.T) {
	t.Run("snapshot without RDMA", func(t *testing.T) {
		root := fakeTreeRDMA(t, 1000, "65536", "65536", "0000000000000000", false)
		r := ncclrun(t, "doctor", "--json", "--root", root)
		require.Equal(t, 0, r.code, "stdout: %s", r.stdout)
		doc := decodeJSON(t, r.stdout)
		mem := check(t, doc, "memlock")
		assert.Equal(t, "skip", mem["status"])
		assert.Contains(t, mem["summary"], "no RDMA device, so NCCL uses sockets")
		assert.Equal(t, "no-ipc-lock", jpath(t, mem, "details", "rule"))
		assert.Equal(t, "ok", check(t, doc, "capabilities")["status"])

		r = ncclrun(t, "--strict", "--root", root, "--", "sh", "-c", "echo started")
		assert.Equal(t, 0, r.code, "stderr: %q", r.stderr)
		assert.Equal(t, "started\n", r.stdout)
		assert.NotContains(t, r.stderr, "ncclrun: memlock")

		r = ncclrun(t, "--strict", "--min-memlock", "1GiB", "--root", root, "--", "sh", "-c", "echo started")
		assert.Equal(t, ExitStrict, r.code, "--min-memlock judges memlock without RDMA; stderr: %q", r.stderr)
		assert.Contains(t, r.stderr, "ncclrun: memlock: ")
	})
	t.Run("live", func(t *testing.T) {
		if ents, _ := os.ReadDir("/sys/class/infiniband"); len(ents) > 0 {
			t.Skip("this machine has RDMA devices: memlock is judged here")
		}
		testutil.RequireRoot(t)
		testutil.RequireTool(t, "prlimit")
		testutil.RequireTool(t, "setpriv")
		// The Kubernetes trap: uid 1000, 64 KiB, IPC_LOCK in the bounding set only.
		trap := []string{"prlimit", "--memlock=65536:65536", "setpriv", "--reuid", "1000", "--regid", "1000", "--clear-groups",
			"--inh-caps", "-all", "--bounding-set", "-all,+ipc_lock"}
		r := invocation{pre: trap, args: []string{"--strict", "--", "sh", "-c", "echo started"}}.run(t)
		assert.Equal(t, 0, r.code, "stderr: %q", r.stderr)
		assert.Equal(t, "started\n", r.stdout)
		assert.NotContains(t, r.stderr, "ncclrun: memlock")
		assert.NotContains(t, r.stderr, "ncclrun: capabilities")

		// --probe asks for the verdict: the real mlock fails.
		r = invocation{pre: trap, args: []string{"doctor", "--json", "--probe", "16MiB"}}.run(t)
		assert.Equal(t, ExitCheckFailed, r.code)
		assert.Equal(t, "fail", check(t, decodeJSON(t, r.stdout), "memlock")["status"])
	})
}
