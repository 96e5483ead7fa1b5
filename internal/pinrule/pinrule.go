// Package pinrule is the one decision of whether CMD can pin memory for
// NCCL, and why: an ordered table of named rules (docs/preflight.md, "the
// decision table") evaluated over a small description of credentials.
//
// Two callers feed it. preflight (doctor, run) describes the live process or
// a snapshot tree; lint describes the state a manifest will produce, after
// the runtime's exec rules (Exec). Both get the same rule for the same
// state, so a manifest and a live pod never get different answers.
//
// The package decides; it does not write sentences. Callers word the rule
// and take fix texts from internal/advice. Standard library only.
package pinrule

import (
	"github.com/ncclrun/ncclrun/internal/advice"
	"github.com/ncclrun/ncclrun/internal/rlimit"
)

// Unlimited is RLIM_INFINITY in a Limit.
const Unlimited = rlimit.Unlimited

// Limit is an RLIMIT_MEMLOCK soft/hard pair in bytes: rlimit's one limit
// type.
type Limit = rlimit.Limit

// CapSets are the five capability sets of one capability, as booleans.
type CapSets struct {
	Effective   bool `json:"effective"`
	Permitted   bool `json:"permitted"`
	Inheritable bool `json:"inheritable"`
	Bounding    bool `json:"bounding"`
	Ambient     bool `json:"ambient"`
}

// Tri is a fact that may be unknown.
type Tri int8

// The values of a Tri; the zero value is Unknown.
const (
	Unknown Tri = iota
	No
	Yes
)

// TriOf turns a bool into No or Yes.
func TriOf(b bool) Tri {
	if b {
		return Yes
	}
	return No
}

// Cred describes ncclrun's own credentials as it runs (the process that
// will start CMD), what it will do to CMD (--user, --drop-cap, --memlock)
// and where it runs. The zero value is root with nothing, limit 0, known.
type Cred struct {
	// UID and GID are ncclrun's effective ids. UIDUnknown: the uid is not
	// root but otherwise unknown (a manifest with runAsNonRoot and no
	// runAsUser runs the image's user).
	UID, GID   int
	UIDUnknown bool
	// IPCLock is CAP_IPC_LOCK in each of ncclrun's sets.
	IPCLock CapSets
	// Setid: CAP_SETUID and CAP_SETGID are both effective (--user can
	// switch users).
	Setid bool
	// FullBounding: the bounding set is a host's full set (it holds
	// CAP_SYS_MODULE and CAP_SYS_ADMIN, which containers do not get), not
	// a container's chosen list.
	FullBounding bool
	NoNewPrivs   bool
	// NoRoot: SECBIT_NOROOT is set, so a root CMD gains no capabilities
	// at exec and follows a non-root user's rules.
	NoRoot bool
	// NoAmbientRaise: SECBIT_NO_CAP_AMBIENT_RAISE is set, so no
	// capability can be raised into the ambient set (PR_CAP_AMBIENT_RAISE
	// fails with EPERM): ncclrun cannot hand CAP_IPC_LOCK over.
	NoAmbientRaise bool
	// FileCap: ncclrun's binary carries cap_ipc_lock+p.
	FileCap Tri
	// Shell: ncclrun was started through a shell or another program
	// rather than exec'd by the runtime as the container's process.
	Shell Tri
	// UserNS: ncclrun runs in a user namespace other than the initial one.
	UserNS bool
	// Memlock is the limit CMD starts with (after the launcher's raise and
	// --memlock); MemlockKnown false means it could not be read.
	Memlock      Limit
	MemlockKnown bool
	// CredsKnown false: the credentials above could not be read.
	CredsKnown bool
	Platform   advice.Platform
	// RDMA: NCCL will register memory with an HCA (an RDMA device is
	// present). Judge forces a verdict without one (--min-memlock,
	// --probe given).
	RDMA  Tri
	Judge bool
	// Plan: what the launcher does to CMD.
	Plan Plan
	// Exec is the file capability of the file CMD's execve runs; the zero
	// value (none, or not known) changes nothing.
	Exec ExecFile
}

// ExecFile describes the file capability of the file the kernel runs for
// CMD: CMD's executable, or for a script its #! interpreter. A file
// capability makes the file privileged, and the kernel clears the ambient
// set at its exec (capabilities(7)), so a non-root CMD keeps CAP_IPC_LOCK
// only where the file itself grants it effective.
type ExecFile struct {
	// FileCap: the file carries a file capability the kernel honours (a
	// valid security.capability, on a mount without nosuid, of this
	// namespace's root).
	FileCap bool
	// Effective is its effective bit; IPCLockPermitted and
	// IPCLockInheritable are CAP_IPC_LOCK in its permitted and inheritable
	// masks.
	Effective, IPCLockPermitted, IPCLockInheritable bool
}

// Plan is what the launcher will do to CMD's credentials.
type Plan struct {
	// User: --user was given and resolved to UID:GID.
	User     bool
	UID, GID int
	// DropIPCLock: --drop-cap removes CAP_IPC_LOCK (or ALL).
	DropIPCLock bool
	// Memlock: --memlock sets CMD's limit (Cred.Memlock holds it).
	Memlock bool
	// Unresolved: --user was given but names no user; CMD's state is
	// ncclrun's own, with no hand-off.
	Unresolved bool
}

// Via values of Command.
const (
	ViaNone      = "none"
	ViaInherited = "inherited"
	ViaAmbient   = "ambient"
	// ViaFile: CMD's own executable grants CAP_IPC_LOCK as an effective
	// file capability.
	ViaFile = "file"
)

// Command is the state CMD will start in.
type Command struct {
	UID, GID   int
	UIDUnknown bool
	// IPCLockEffective: CMD holds CAP_IPC_LOCK effective, by Via.
	IPCLockEffective bool
	Via              string
	// Ambient: the launcher must raise CAP_IPC_LOCK into CMD's ambient set.
	Ambient bool
	// SwitchUser: --user changes the uid or gid; LacksSetid: it cannot,
	// for want of CAP_SETUID/CAP_SETGID.
	SwitchUser bool
	LacksSetid bool
	// LostAtExec: ncclrun hands CMD CAP_IPC_LOCK (ambient, or inherited
	// from an ambient set) but CMD's executable carries a file capability
	// without it effective, so the exec clears it.
	LostAtExec bool
}

// Root reports whether CMD runs as root.
func (c Command) Root() bool { return !c.UIDUnknown && c.UID == 0 }

// Command computes the state CMD will start in from ncclrun's own state and
// the launcher's plan (docs/research/capabilities.md §1.7, §3, §4).
func (c Cred) Command() Command {
	cmd := Command{UID: c.UID, GID: c.GID, UIDUnknown: c.UIDUnknown, Via: ViaNone}
	if c.Plan.User {
		cmd.SwitchUser = c.UIDUnknown || c.Plan.UID != c.UID || c.Plan.GID != c.GID
		cmd.UID, cmd.GID, cmd.UIDUnknown = c.Plan.UID, c.Plan.GID, false
	}
	if !c.CredsKnown || c.Plan.Unresolved {
		return cmd
	}
	if cmd.SwitchUser && !c.Setid {
		cmd.LacksSetid = true
		return cmd
	}
	ipc := c.IPCLock
	switch {
	case c.Plan.DropIPCLock, c.UserNS:
		// Dropped on purpose, or useless: capable() checks the initial
		// user namespace (kernel/capability.c).
	case cmd.Root() && !c.NoRoot:
		// Root after execve: P' = bounding | inheritable.
		if ipc.Bounding || ipc.Inheritable {
			cmd.IPCLockEffective, cmd.Via = true, ViaInherited
		}
	case !cmd.SwitchUser && ipc.Effective && ipc.Ambient:
		cmd.IPCLockEffective, cmd.Via = true, ViaInherited
	case ipc.Permitted && (ipc.Bounding || ipc.Inheritable) && !c.NoAmbientRaise:
		// PR_CAP_AMBIENT_RAISE needs the cap in P and I; capset may add
		// it to I only when it is in the bounding set or already in I.
		cmd.IPCLockEffective, cmd.Via, cmd.Ambient = true, ViaAmbient, true
	}
	if c.Exec.FileCap && (!cmd.Root() || c.NoRoot) && !c.UserNS && !c.Plan.DropIPCLock {
		cmd = c.atExec(cmd)
	}
	return cmd
}

// atExec applies the exec of a file with a file capability to a non-root
// CMD, or root under SECBIT_NOROOT (capabilities(7),
// security/commoncap.c): pA' = 0, pP' = (pI & fI) | (fP & X),
// pE' = fE ? pP' : 0, and under no_new_privs pP' holds nothing the
// process lacked before the exec.
func (c Cred) atExec(cmd Command) Command {
	f := c.Exec
	// Handed over (ambient or inherited): the process that execs holds
	// CAP_IPC_LOCK in P and I; the launcher adds it to I for the ambient
	// raise.
	handed := cmd.Via != ViaNone
	inh := handed || c.IPCLock.Inheritable
	before := handed || (!cmd.SwitchUser && c.IPCLock.Permitted)
	prm := (inh && f.IPCLockInheritable) || (c.IPCLock.Bounding && f.IPCLockPermitted)
	if c.NoNewPrivs && !before {
		prm = false
	}
	if f.Effective && prm {
		cmd.IPCLockEffective, cmd.Via = true, ViaFile
		return cmd
	}
	cmd.IPCLockEffective, cmd.Via, cmd.LostAtExec = false, ViaNone, handed
	return cmd
}

// Status is a verdict's status; preflight.Status is this type.
type Status string

// The statuses of a verdict.
const (
	OK   Status = "ok"
	Warn Status = "warn"
	Fail Status = "fail"
	Skip Status = "skip"
)

// The rule names, in table order (docs/preflight.md). The comments give
// the rows of docs/research/capabilities.md §4.
const (
	RuleUnlimited     = "unlimited"           // row 1
	RuleAmbient       = "ambient-raise"       // rows 6, 7
	RuleRootIPCLock   = "root-ipc-lock"       // row 2
	RuleInherited     = "ambient-inherited"   // row 3
	RuleCmdFileCap    = "cmd-file-cap"        // CMD's own cap_ipc_lock+ep
	RuleUnknown       = "unknown-credentials" // status unreadable
	RuleLimitZero     = "limit-zero"          // row 12
	RuleUserNS        = "userns"              // row 11
	RuleFinite        = "finite"              // row 4/5 outcome
	RuleCmdCapLost    = "cmd-file-cap-lost"   // exec of a privileged file clears ambient
	RuleNoSetid       = "no-setuid"           // --user without CAP_SETUID/SETGID
	RuleDropped       = "dropped"             // --drop-cap IPC_LOCK
	RuleNNPFileCap    = "nnp-file-cap"        // row 7b
	RuleK8sTrap       = "k8s-trap"            // row 8
	RuleRootNoIPCLock = "root-no-ipc-lock"    // row 9
	RuleNoIPCLock     = "no-ipc-lock"         // row 10
)

// Verdict is the decision for one credential description.
type Verdict struct {
	// Rule is the first row of the table that holds.
	Rule string
	// Status is the row's status; Judged false means memlock does not
	// matter here (no RDMA device) and Status is Skip, while Rule still
	// says what would happen with an HCA.
	Status Status
	Judged bool
	// RowStatus is the row's status before the RDMA gate.
	RowStatus Status
	// Fixes are the remedies in the order a fix text gives them.
	Fixes []advice.Fix
	// Command is CMD's state.
	Command Command
	// MinMet: the limit is at least the minimum.
	MinMet bool
	// CapabilityCause: the capability state is why memlock fails (the
	// capabilities check warns with the same fix).
	CapabilityCause bool
}

// Input is what a row looks at.
type Input struct {
	Cred
	Cmd Command
	Min int64
}

func (in Input) ipc() CapSets { return in.Cred.IPCLock }

// nonRootBoundingOnly: CMD is not root and CAP_IPC_LOCK is in a
// container's bounding set but not in ncclrun's permitted set.
func (in Input) nonRootBoundingOnly() bool {
	return !in.Cmd.Root() && in.ipc().Bounding && !in.ipc().Permitted && !in.FullBounding
}

// Row is one rule of the table.
type Row struct {
	Name string
	// Doc is the rule's meaning, as docs/preflight.md's table says it.
	Doc string
	// When selects the row; the first row whose When holds decides.
	When   func(Input) bool
	Status func(Input) Status
	// Fixes for the row. Cause: the capability state is why memlock
	// fails, so the capabilities check warns with the same fix (nil: no).
	Fixes []advice.Fix
	Cause func(Input) bool
}

func always(Input) bool { return true }

// The constant Status functions of Table's rows (functions, not a
// closure over the status, so that the table is data with no code run at
// start).
func statusOK(Input) Status   { return OK }
func statusWarn(Input) Status { return Warn }
func statusFail(Input) Status { return Fail }

// Table is the decision, evaluated top-down.
var Table = []Row{
	{Name: RuleUnlimited, Doc: "CMD's soft limit is unlimited",
		When: func(in Input) bool { return in.MemlockKnown && in.Memlock.Soft == Unlimited }, Status: statusOK},
	{Name: RuleAmbient, Doc: "ncclrun holds CAP_IPC_LOCK in its permitted set (root, `setcap cap_ipc_lock+p`, `--user` from root) and hands it to CMD as ambient",
		When: func(in Input) bool { return in.Cmd.Via == ViaAmbient }, Status: statusOK},
	{Name: RuleRootIPCLock, Doc: "CMD is root and CAP_IPC_LOCK is in the bounding set (root gets its bounding set at exec)",
		When: func(in Input) bool { return in.Cmd.IPCLockEffective && in.Cmd.Root() && !in.NoRoot }, Status: statusOK},
	{Name: RuleCmdFileCap, Doc: "CMD's executable (a script's interpreter) grants CAP_IPC_LOCK itself as an effective file capability (`setcap cap_ipc_lock+ep`)",
		When: func(in Input) bool { return in.Cmd.Via == ViaFile }, Status: statusOK},
	{Name: RuleInherited, Doc: "non-root CMD inherits CAP_IPC_LOCK that is already effective and ambient",
		When: func(in Input) bool { return in.Cmd.IPCLockEffective }, Status: statusOK},
	{Name: RuleUnknown, Doc: "the limit or the credentials could not be read",
		When:   func(in Input) bool { return !in.MemlockKnown || !in.CredsKnown },
		Status: statusWarn, Fixes: []advice.Fix{advice.RaiseMemlock}},
	{Name: RuleLimitZero, Doc: "limit 0: ibv_reg_mr/mlock fail with EPERM",
		When: func(in Input) bool { return in.Memlock.Soft == 0 }, Status: statusFail, Fixes: []advice.Fix{advice.RaiseMemlock}},
	{Name: RuleUserNS, Doc: "user namespace: capabilities neither bypass nor raise the limit",
		When: func(in Input) bool { return in.UserNS },
		Status: func(in Input) Status {
			if in.Memlock.Soft >= in.Min {
				return Warn
			}
			return Fail
		}, Fixes: []advice.Fix{advice.RaiseMemlock}, Cause: always},
	{Name: RuleFinite, Doc: "enough for the minimum, but not unlimited as NCCL recommends",
		When: func(in Input) bool { return in.Memlock.Soft >= in.Min }, Status: statusWarn, Fixes: []advice.Fix{advice.RaiseMemlock}},
	{Name: RuleCmdCapLost, Doc: "ncclrun hands CMD CAP_IPC_LOCK, but CMD's executable (a script's interpreter) carries a file capability without it effective: the kernel clears the ambient set at that exec",
		When: func(in Input) bool { return in.Cmd.LostAtExec }, Status: statusFail, Fixes: []advice.Fix{advice.RaiseMemlock}, Cause: always},
	{Name: RuleNoSetid, Doc: "`--user` needs CAP_SETUID and CAP_SETGID, which ncclrun lacks",
		When: func(in Input) bool { return in.Cmd.LacksSetid }, Status: statusFail, Fixes: []advice.Fix{advice.AddSetid, advice.RaiseMemlock}, Cause: always},
	{Name: RuleDropped, Doc: "`--drop-cap` removes CAP_IPC_LOCK (reproducing production)",
		When: func(in Input) bool { return in.Plan.DropIPCLock }, Status: statusFail, Fixes: []advice.Fix{advice.RaiseMemlock}, Cause: always},
	{Name: RuleNNPFileCap, Doc: "ncclrun has a file capability, but no_new_privs made the kernel ignore it: a shell started it, or Docker kept IPC_LOCK in the bounding set only (row 7b)",
		When: func(in Input) bool {
			return in.nonRootBoundingOnly() && in.NoNewPrivs && in.FileCap == Yes
		}, Status: statusFail, Fixes: []advice.Fix{advice.ExecForm, advice.RootUser, advice.RaiseMemlock}, Cause: always},
	{Name: RuleK8sTrap, Doc: "non-root, CAP_IPC_LOCK in the bounding set only (Kubernetes `runAsUser` + `capabilities.add`, `docker --user N --cap-add`)",
		When: func(in Input) bool { return in.nonRootBoundingOnly() }, Status: statusFail, Fixes: []advice.Fix{advice.Ambient, advice.RaiseMemlock}, Cause: always},
	{Name: RuleRootNoIPCLock, Doc: "root without CAP_IPC_LOCK (Docker's and containerd's default set)",
		When: func(in Input) bool { return in.Cmd.Root() && !in.ipc().Bounding }, Status: statusFail, Fixes: []advice.Fix{advice.AddIPCLock, advice.RaiseMemlock}, Cause: always},
	{Name: RuleNoIPCLock, Doc: "anything else below the minimum",
		When: func(Input) bool { return true }, Status: statusFail, Fixes: []advice.Fix{advice.RaiseMemlock, advice.Ambient},
		// A container's user without IPC_LOCK: the capability is a way
		// out. An ordinary user on a host: the limit is. Root under
		// SECBIT_NOROOT, or a CAP_IPC_LOCK that SECBIT_NO_CAP_AMBIENT_RAISE
		// keeps from being handed over: the securebits are the cause.
		Cause: func(in Input) bool {
			return !in.FullBounding || (in.NoRoot && in.Cmd.Root()) || (in.NoAmbientRaise && in.ipc().Permitted)
		}},
}

// Decide evaluates the table for c with min bytes as the minimum CMD must
// be able to pin.
func Decide(c Cred, min int64) Verdict {
	in := Input{Cred: c, Cmd: c.Command(), Min: min}
	for _, r := range Table {
		if !r.When(in) {
			continue
		}
		v := Verdict{Rule: r.Name, Status: r.Status(in), RowStatus: r.Status(in), Judged: true, Fixes: r.Fixes, Command: in.Cmd,
			MinMet: in.MemlockKnown && (in.Memlock.Soft == Unlimited || in.Memlock.Soft >= min)}
		v.CapabilityCause = v.Status == Fail && r.Cause != nil && r.Cause(in)
		if v.Status != OK && c.RDMA == No && !c.Judge {
			// Without an HCA NCCL registers no memory.
			v.Status, v.Judged, v.CapabilityCause = Skip, false, false
		}
		return v
	}
	panic("pinrule: the last row always holds")
}

// RowNames lists the rule names in table order.
func RowNames() []string {
	out := make([]string, len(Table))
	for i, r := range Table {
		out[i] = r.Name
	}
	return out
}
