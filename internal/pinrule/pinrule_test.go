package pinrule

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ncclrun/ncclrun/internal/advice"
)

const kib64 = 64 << 10

func base() Cred {
	return Cred{UID: 1000, GID: 1000, Memlock: Limit{Soft: kib64, Hard: kib64}, MemlockKnown: true, CredsKnown: true,
		Platform: advice.Kubernetes, RDMA: Yes, Setid: false}
}

// TestEveryRow reaches every row of the table with one description, in
// table order: the table is the decision, and each row has a case.
func TestEveryRow(t *testing.T) {
	with := func(f func(*Cred)) Cred { c := base(); f(&c); return c }
	cases := []struct {
		rule   string
		status Status
		via    string
		cred   Cred
	}{
		{RuleUnlimited, OK, ViaNone, with(func(c *Cred) { c.Memlock = Limit{Soft: Unlimited, Hard: Unlimited} })},
		{RuleAmbient, OK, ViaAmbient, with(func(c *Cred) { c.IPCLock = CapSets{Permitted: true, Bounding: true}; c.FileCap = Yes })},
		{RuleRootIPCLock, OK, ViaInherited, with(func(c *Cred) { c.UID = 0; c.IPCLock = CapSets{Effective: true, Permitted: true, Bounding: true} })},
		{RuleCmdFileCap, OK, ViaFile, with(func(c *Cred) {
			c.IPCLock = CapSets{Permitted: true, Bounding: true}
			c.Exec = ExecFile{FileCap: true, Effective: true, IPCLockPermitted: true}
		})},
		{RuleInherited, OK, ViaInherited, with(func(c *Cred) {
			c.IPCLock = CapSets{Effective: true, Permitted: true, Inheritable: true, Bounding: true, Ambient: true}
		})},
		{RuleUnknown, Warn, ViaNone, with(func(c *Cred) { c.CredsKnown = false })},
		{RuleLimitZero, Fail, ViaNone, with(func(c *Cred) { c.Memlock = Limit{} })},
		{RuleUserNS, Fail, ViaNone, with(func(c *Cred) {
			c.UID = 0
			c.UserNS = true
			c.IPCLock = CapSets{Effective: true, Permitted: true, Bounding: true}
		})},
		{RuleFinite, Warn, ViaNone, with(func(c *Cred) { c.Memlock = Limit{Soft: 2 << 30, Hard: 2 << 30} })},
		{RuleCmdCapLost, Fail, ViaNone, with(func(c *Cred) {
			c.IPCLock = CapSets{Permitted: true, Bounding: true}
			c.Exec = ExecFile{FileCap: true, IPCLockPermitted: true}
		})},
		{RuleNoSetid, Fail, ViaNone, with(func(c *Cred) {
			c.UID = 0
			c.IPCLock = CapSets{Effective: true, Permitted: true, Bounding: true}
			c.Plan = Plan{User: true, UID: 1000, GID: 1000}
		})},
		{RuleDropped, Fail, ViaNone, with(func(c *Cred) {
			c.UID = 0
			c.IPCLock = CapSets{Effective: true, Permitted: true, Bounding: true}
			c.Plan.DropIPCLock = true
		})},
		{RuleNNPFileCap, Fail, ViaNone, with(func(c *Cred) { c.IPCLock = CapSets{Bounding: true}; c.NoNewPrivs = true; c.FileCap = Yes })},
		{RuleK8sTrap, Fail, ViaNone, with(func(c *Cred) { c.IPCLock = CapSets{Bounding: true} })},
		{RuleRootNoIPCLock, Fail, ViaNone, with(func(c *Cred) { c.UID = 0 })},
		{RuleNoIPCLock, Fail, ViaNone, base()},
	}
	require.Len(t, cases, len(Table))
	for i, tc := range cases {
		assert.Equal(t, Table[i].Name, tc.rule, "case %d is in table order", i)
		v := Decide(tc.cred, 1<<30)
		assert.Equal(t, tc.rule, v.Rule)
		assert.Equal(t, tc.status, v.Status, tc.rule)
		assert.Equal(t, tc.via, v.Command.Via, tc.rule)
		assert.True(t, v.Judged)
	}
}

func TestNoRDMAGate(t *testing.T) {
	c := base()
	c.IPCLock = CapSets{Bounding: true}
	c.RDMA = No
	v := Decide(c, 1<<30)
	assert.Equal(t, RuleK8sTrap, v.Rule, "the rule still says what would happen")
	assert.Equal(t, Skip, v.Status)
	assert.Equal(t, Fail, v.RowStatus)
	assert.False(t, v.Judged)
	assert.False(t, v.CapabilityCause)
	c.Judge = true
	assert.Equal(t, Fail, Decide(c, 1<<30).Status)
	c.Judge, c.Memlock = false, Limit{Soft: Unlimited, Hard: Unlimited}
	assert.Equal(t, OK, Decide(c, 1<<30).Status, "ok stays ok")
}

// TestCapabilityCause: a container user without
// IPC_LOCK at all fails memlock as the trap does, and the capability
// state is the cause in both; an ordinary host user's is not.
func TestCapabilityCause(t *testing.T) {
	trap := base()
	trap.IPCLock = CapSets{Bounding: true}
	assert.True(t, Decide(trap, 1<<30).CapabilityCause)
	none := base()
	assert.Equal(t, RuleNoIPCLock, Decide(none, 1<<30).Rule)
	assert.True(t, Decide(none, 1<<30).CapabilityCause)
	host := base()
	host.FullBounding, host.IPCLock = true, CapSets{Bounding: true}
	assert.Equal(t, RuleNoIPCLock, Decide(host, 1<<30).Rule)
	assert.False(t, Decide(host, 1<<30).CapabilityCause)
}

// TestExecFileCap applies the kernel's rules for the exec of a file with a
// file capability (capabilities(7): the ambient set is cleared, pP' =
// (pI & fI) | (fP & X), pE' = fE ? pP' : 0, no_new_privs adds nothing) to
// the state ncclrun hands CMD. Each case was seen in a container: uid 1000
// with --cap-add IPC_LOCK and a cap_ipc_lock+p ncclrun, or --user from
// root.
func TestExecFileCap(t *testing.T) {
	handoff := CapSets{Permitted: true, Bounding: true} // cap_ipc_lock+p ncclrun, uid 1000
	ambient := CapSets{Effective: true, Permitted: true, Inheritable: true, Bounding: true, Ambient: true}
	cases := []struct {
		name string
		ipc  CapSets
		nnp  bool
		plan Plan
		uid  int
		exec ExecFile
		rule string
		via  string
		lost bool
	}{
		{"no file capability keeps the hand-off", handoff, false, Plan{}, 1000, ExecFile{}, RuleAmbient, ViaAmbient, false},
		{"cap_ipc_lock+p clears the ambient set", handoff, false, Plan{}, 1000, ExecFile{FileCap: true, IPCLockPermitted: true}, RuleCmdCapLost, ViaNone, true},
		{"another capability +ep clears it too", handoff, false, Plan{}, 1000, ExecFile{FileCap: true, Effective: true}, RuleCmdCapLost, ViaNone, true},
		{"an empty file capability clears it", handoff, false, Plan{}, 1000, ExecFile{FileCap: true}, RuleCmdCapLost, ViaNone, true},
		{"cap_ipc_lock+ep grants it", handoff, false, Plan{}, 1000, ExecFile{FileCap: true, Effective: true, IPCLockPermitted: true}, RuleCmdFileCap, ViaFile, false},
		{"cap_ipc_lock+ei takes it from the inheritable set", handoff, false, Plan{}, 1000, ExecFile{FileCap: true, Effective: true, IPCLockInheritable: true}, RuleCmdFileCap, ViaFile, false},
		{"cap_ipc_lock+ep under no_new_privs after the hand-off", handoff, true, Plan{}, 1000, ExecFile{FileCap: true, Effective: true, IPCLockPermitted: true}, RuleCmdFileCap, ViaFile, false},
		{"an inherited ambient set is cleared as well", ambient, false, Plan{}, 1000, ExecFile{FileCap: true}, RuleCmdCapLost, ViaNone, true},
		{"--user from root loses it", CapSets{Effective: true, Permitted: true, Bounding: true}, false, Plan{User: true, UID: 1000, GID: 1000}, 0,
			ExecFile{FileCap: true, IPCLockPermitted: true}, RuleCmdCapLost, ViaNone, true},
		{"root CMD keeps root's rule", CapSets{Effective: true, Permitted: true, Bounding: true}, false, Plan{}, 0, ExecFile{FileCap: true}, RuleRootIPCLock, ViaInherited, false},
		{"bounding only: the file's +ep grants it", CapSets{Bounding: true}, false, Plan{}, 1000, ExecFile{FileCap: true, Effective: true, IPCLockPermitted: true}, RuleCmdFileCap, ViaFile, false},
		{"bounding only, no_new_privs: the file's +ep is refused", CapSets{Bounding: true}, true, Plan{}, 1000, ExecFile{FileCap: true, Effective: true, IPCLockPermitted: true}, RuleK8sTrap, ViaNone, false},
		{"nothing handed: nothing lost", CapSets{Bounding: true}, false, Plan{}, 1000, ExecFile{FileCap: true, IPCLockPermitted: true}, RuleK8sTrap, ViaNone, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := base()
			c.UID, c.Setid = tc.uid, tc.uid == 0
			c.IPCLock, c.NoNewPrivs, c.Plan, c.Exec = tc.ipc, tc.nnp, tc.plan, tc.exec
			v := Decide(c, 1<<30)
			assert.Equal(t, tc.rule, v.Rule)
			assert.Equal(t, tc.via, v.Command.Via)
			assert.Equal(t, tc.lost, v.Command.LostAtExec)
			assert.Equal(t, tc.via != ViaNone, v.Command.IPCLockEffective)
		})
	}
}

// TestNoRoot: under SECBIT_NOROOT root gains no capabilities at exec
// (capabilities(7)), so a root CMD keeps CAP_IPC_LOCK only through the
// ambient set, as a non-root one does.
func TestNoRoot(t *testing.T) {
	full := CapSets{Effective: true, Permitted: true, Bounding: true}
	cases := []struct {
		name    string
		ipc     CapSets
		noroot  bool
		rule    string
		via     string
		ambient bool
	}{
		{"root, IPC_LOCK in the bounding set", CapSets{Bounding: true}, false, RuleRootIPCLock, ViaInherited, false},
		{"noroot, IPC_LOCK in the bounding set only", CapSets{Bounding: true}, true, RuleNoIPCLock, ViaNone, false},
		{"noroot, ncclrun holds it: handed over as ambient", full, true, RuleAmbient, ViaAmbient, true},
		{"noroot, already ambient: inherited", CapSets{Effective: true, Permitted: true, Inheritable: true, Bounding: true, Ambient: true}, true, RuleInherited, ViaInherited, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := base()
			c.UID, c.GID, c.Setid = 0, 0, true
			c.IPCLock, c.NoRoot = tc.ipc, tc.noroot
			v := Decide(c, 1<<30)
			assert.Equal(t, tc.rule, v.Rule)
			assert.Equal(t, tc.via, v.Command.Via)
			assert.Equal(t, tc.ambient, v.Command.Ambient)
		})
	}
	host := base()
	host.UID, host.GID, host.NoRoot, host.FullBounding = 0, 0, true, true
	host.IPCLock = CapSets{Bounding: true}
	assert.True(t, Decide(host, 1<<30).CapabilityCause, "on a host too, the securebits are the cause")
}

// TestNoAmbientRaise: under SECBIT_NO_CAP_AMBIENT_RAISE PR_CAP_AMBIENT_RAISE
// fails with EPERM, so ncclrun cannot hand CAP_IPC_LOCK over and must not
// ask the launcher to (the start would fail); what CMD already inherits,
// or gets as root, is not a raise.
func TestNoAmbientRaise(t *testing.T) {
	cases := []struct {
		name    string
		uid     int
		ipc     CapSets
		plan    Plan
		rule    string
		via     string
		ambient bool
		cause   bool
	}{
		{"uid 1000, cap_ipc_lock+p ncclrun", 1000, CapSets{Permitted: true, Bounding: true}, Plan{}, RuleNoIPCLock, ViaNone, false, true},
		{"--user from root", 0, CapSets{Effective: true, Permitted: true, Bounding: true}, Plan{User: true, UID: 1000, GID: 1000}, RuleNoIPCLock, ViaNone, false, true},
		{"root CMD: root's rule", 0, CapSets{Effective: true, Permitted: true, Bounding: true}, Plan{}, RuleRootIPCLock, ViaInherited, false, false},
		{"already ambient: inherited", 1000, CapSets{Effective: true, Permitted: true, Inheritable: true, Bounding: true, Ambient: true}, Plan{}, RuleInherited, ViaInherited, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := base()
			c.UID, c.GID, c.Setid = tc.uid, tc.uid, tc.uid == 0
			c.IPCLock, c.Plan, c.NoAmbientRaise = tc.ipc, tc.plan, true
			v := Decide(c, 1<<30)
			assert.Equal(t, tc.rule, v.Rule)
			assert.Equal(t, tc.via, v.Command.Via)
			assert.Equal(t, tc.ambient, v.Command.Ambient)
			assert.Equal(t, tc.cause, v.CapabilityCause)
		})
	}
}
