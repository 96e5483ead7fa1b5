package preflight

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWriteChecksWritesASharedFixOnce(t *testing.T) {
	r := Report{Checks: []Result{
		{ID: "memlock", Status: Fail, Summary: "low", Fix: "raise it"},
		{ID: "capabilities", Status: Fail, Summary: "no cap", Fix: "raise it"},
		{ID: "shm", Status: Warn, Summary: "small", Fix: "grow it"},
		{ID: "gpu", Status: OK, Summary: "fine", Fix: "unused"},
	}}
	var b bytes.Buffer
	require.NoError(t, r.WriteChecks(&b, Warn, Fail))
	assert.Equal(t, "ncclrun: memlock: low\nncclrun:   fix: raise it\n"+
		"ncclrun: capabilities: no cap\n"+
		"ncclrun: shm: small\nncclrun:   fix: grow it\n", b.String())
}

func TestMemlockState(t *testing.T) {
	for _, tc := range []struct {
		cs   CommandState
		want string
	}{
		{CommandState{UID: 1000, Memlock: Rlimit{Soft: 64 << 10, Hard: 64 << 10}}, "RLIMIT_MEMLOCK 64 KiB (soft=hard), uid 1000, CAP_IPC_LOCK not effective"},
		{CommandState{Memlock: Rlimit{Soft: 64 << 10, Hard: Unlimited}, IPCLockEffective: true, Via: "ambient"}, "RLIMIT_MEMLOCK 64 KiB (hard unlimited), uid 0, CAP_IPC_LOCK effective (ambient)"},
	} {
		assert.Equal(t, tc.want, tc.cs.MemlockState())
	}
}

// TestRenderPrintable: doctor's table and run's check lines show the
// control characters a check quotes from the files it read (a snapshot
// under --root may be anyone's) as escapes.
func TestRenderPrintable(t *testing.T) {
	r := Report{Environment: Environment{Kind: "docker", Reason: "/.dockerenv\x1b]0;x\x07"}, Checks: []Result{
		{ID: "nccl-env", Status: Warn, Summary: "NCCL_SOCKET_IFNAME=\x1b[2Jeth0 from /etc/nccl.conf", Fix: "unset \x1b[2J"},
	}}
	var table, checks bytes.Buffer
	require.NoError(t, r.WriteTable(&table))
	require.NoError(t, r.WriteChecks(&checks, Warn))
	for _, out := range []string{table.String(), checks.String()} {
		assert.Contains(t, out, `NCCL_SOCKET_IFNAME=\x1b[2Jeth0`)
		assert.Contains(t, out, `unset \x1b[2J`)
		assert.NotContains(t, out, "\x1b")
		assert.NotContains(t, out, "\x07")
	}
}
