package preflight

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestNNPFileCapWords: on a platform that honours the file capability in
// exec form (Kubernetes/CRI), ncclrun carries
// cap_ipc_lock+p but a shell under no_new_privs lost it, so the fix is
// the exec form (or dropping the shell), never another setcap.
func TestNNPFileCapWords(t *testing.T) {
	yes := true
	c := credFacts{
		status:  procStatus{UID: 1000, GID: 1000, Bnd: 1 << capIPCLock, NoNewPrivs: true, HasNNP: true},
		memlock: Rlimit{Soft: 65536, Hard: 65536},
		fileCap: &yes,
	}
	for _, kind := range []Platform{Kubernetes, Host} {
		p := planCommand(newRoot(t.TempDir()), c, Plan{}, kind)
		v := decideMemlock(c, p, DefaultMinMemlock, kind, true, false)
		assert.Equal(t, ruleNNPFileCap, v.rule)
		assert.Equal(t, Fail, v.status)
		assert.Contains(t, v.summary, "already carries cap_ipc_lock+p")
		assert.Contains(t, v.fix, "exec form")
		assert.NotContains(t, v.fix, "setcap", kind)
		assert.True(t, v.cause)
	}
	p := planCommand(newRoot(t.TempDir()), c, Plan{}, "docker")
	v := decideMemlock(c, p, DefaultMinMemlock, "docker", true, false)
	assert.Contains(t, v.fix, "bounding set only")
	assert.NotContains(t, v.fix, "exec form")
}

// TestTrapFixSaysBothSets: on Kubernetes the trap's words say the CRI spec held IPC_LOCK in permitted too.
func TestTrapFixSaysBothSets(t *testing.T) {
	c := credFacts{status: procStatus{UID: 1000, GID: 1000, Bnd: 1 << capIPCLock}, memlock: Rlimit{Soft: 65536, Hard: 65536}}
	p := planCommand(newRoot(t.TempDir()), c, Plan{}, "kubernetes")
	v := decideMemlock(c, p, DefaultMinMemlock, "kubernetes", true, false)
	assert.Equal(t, ruleK8sTrap, v.rule)
	assert.Contains(t, v.fix, "bounding, permitted and effective sets of the container's first process")
}
