package preflight

import (
	"bytes"
	"fmt"
	"os"
	"strings"

	"github.com/ncclrun/ncclrun/internal/advice"
	"github.com/ncclrun/ncclrun/internal/caps"
	"github.com/ncclrun/ncclrun/internal/pinrule"
	"github.com/ncclrun/ncclrun/internal/rlimit"
	"github.com/ncclrun/ncclrun/internal/units"
)

// credFacts are ncclrun's own credentials and limit as found.
type credFacts struct {
	status     procStatus
	statusErr  error
	memlock    Rlimit
	memlockErr error
	userns     bool
	usernsErr  error
	fileCap    *bool // nil: unknown (snapshot tree, or not readable)
	// raise, for a snapshot: how memlock, which holds the values after the
	// raise ncclrun run would do, was predicted ("" when nothing changes).
	raise string
}

// simulateRaise turns a snapshot's limit, taken before any raise, into the
// one CMD gets after the raise run and doctor make of their own limit
// (rlimit.Raise, predicted by rlimit.Raised): soft to hard, then both to
// unlimited where the recorded process may raise a hard limit, that is
// where it holds CAP_SYS_RESOURCE effective in the initial user namespace.
// A tree that does not record proc/self/status or proc/self/uid_map
// cannot show that, and the hard limit is kept: predicting unlimited
// where the raise would be refused would hide a failure. It returns the
// limit as found when the prediction changes it, else nil.
func simulateRaise(c *credFacts) *Rlimit {
	if c.memlockErr != nil {
		return nil
	}
	before := c.memlock
	sysResource := c.statusErr == nil && caps.Has(c.status.Eff, capSysResource)
	initNS := c.usernsErr == nil && !c.userns
	after := rlimit.Raised(before, rlimit.HardRaisePermitted(sysResource, initNS))
	if after == before {
		return nil
	}
	c.memlock = after
	switch {
	case after.Hard != before.Hard:
		c.raise = "simulated: ncclrun run raises the soft and the hard limit to unlimited (the snapshot holds CAP_SYS_RESOURCE in the initial user namespace)"
	case before.Hard == Unlimited:
		c.raise = "simulated: ncclrun run raises the soft limit to the hard limit"
	default:
		c.raise = "simulated: ncclrun run raises the soft limit to the hard limit; the hard limit stays, " + hardKept(c, sysResource)
	}
	return &before
}

// hardKept says why simulateRaise keeps a finite hard limit.
func hardKept(c *credFacts, sysResource bool) string {
	switch {
	case c.statusErr != nil:
		return "as the snapshot's capabilities are unknown"
	case !sysResource:
		return "as raising it needs CAP_SYS_RESOURCE"
	case c.usernsErr != nil:
		return "as the snapshot does not show whether CAP_SYS_RESOURCE is in the initial user namespace (no readable proc/self/uid_map)"
	default:
		return "as CAP_SYS_RESOURCE in a user namespace does not raise it"
	}
}

func gatherCreds(s sysRoot) credFacts {
	var c credFacts
	if s.live {
		c.status, c.statusErr = liveStatus()
		c.memlock, c.memlockErr = liveMemlock()
		if exe, err := os.Executable(); err == nil {
			if fc, err := caps.FileCaps(exe); err == nil {
				c.fileCap = &fc
			}
		}
	} else {
		if b, err := s.readFile("proc/self/status"); err != nil {
			c.statusErr = err
		} else if c.status, err = parseStatus(bytes.NewReader(b)); err != nil {
			c.statusErr = fmt.Errorf("parse proc/self/status: %w", err)
		}
		if b, err := s.readFile("proc/self/limits"); err != nil {
			c.memlockErr = err
		} else if c.memlock, err = parseMemlockLimits(bytes.NewReader(b)); err != nil {
			c.memlockErr = fmt.Errorf("parse proc/self/limits: %w", err)
		}
	}
	if b, err := s.readFile("proc/self/uid_map"); err != nil {
		c.usernsErr = err
	} else {
		c.userns, c.usernsErr = parseUIDMap(b)
	}
	return c
}

// cmdPlan is CMD's computed state plus what preflight learnt on the way.
type cmdPlan struct {
	cmd        CommandState
	cred       pinrule.Cred
	state      pinrule.Command
	dropped    bool  // --drop-cap removes CAP_IPC_LOCK
	switchUID  bool  // --user changes uid or gid
	lacksSetid bool  // switching needs CAP_SETUID+CAP_SETGID, ncclrun lacks one
	userErr    error // --user could not be resolved
	limitPlan  bool  // Plan.Memlock overrides the limit
	// execFile is the file the kernel runs for CMD (Plan.Exec, or its #!
	// interpreter) when its file capability was read, execErr why not.
	execFile, execCmd string
	execErr           error
	// memlockRefused says why the launcher cannot give CMD Plan.Memlock
	// ("" when it can, or when that is unknown).
	memlockRefused string
}

// execWord names the file whose capability decides CMD's, and the script
// it interprets when it is one's #! interpreter.
func (p cmdPlan) execWord() string {
	if p.execCmd != "" && p.execCmd != p.execFile {
		return fmt.Sprintf("%s (the #! interpreter of %s)", p.execFile, p.execCmd)
	}
	return p.execFile
}

// memlockRefused says why setrlimit(2) will refuse want as CMD's limit
// (the launcher then does not start CMD: exit 125): a hard limit above
// ncclrun's own (after its raise) needs CAP_SYS_RESOURCE effective in the
// initial user namespace. "" when it is allowed or that is unknown.
func memlockRefused(c credFacts, want Rlimit) string {
	cur := c.memlock
	if c.memlockErr != nil || !rlimit.Above(want.Hard, cur.Hard) {
		return ""
	}
	if c.statusErr != nil || c.usernsErr != nil {
		return ""
	}
	what := fmt.Sprintf("--memlock asks for a hard RLIMIT_MEMLOCK of %s, above ncclrun's %s", units.FormatSize(want.Hard), units.FormatSize(cur.Hard))
	switch {
	case !caps.Has(c.status.Eff, capSysResource):
		return what + ", which needs CAP_SYS_RESOURCE, and ncclrun does not hold it effective"
	case c.userns:
		return what + ", which needs CAP_SYS_RESOURCE in the initial user namespace, and ncclrun runs in another"
	}
	return ""
}

// credential describes ncclrun's state for the rule table.
func credential(c credFacts, kind Platform) pinrule.Cred {
	st := c.status
	cr := pinrule.Cred{
		UID: st.UID, GID: st.GID,
		IPCLock:        st.sets(capIPCLock),
		Setid:          caps.Has(st.Eff, capSetuid) && caps.Has(st.Eff, capSetgid),
		FullBounding:   unrestricted(st.Bnd),
		NoNewPrivs:     st.NoNewPrivs,
		NoRoot:         st.NoRoot,
		NoAmbientRaise: st.NoAmbientRaise,
		UserNS:         c.userns,
		Memlock:        c.memlock, MemlockKnown: c.memlockErr == nil,
		CredsKnown: c.statusErr == nil,
		Platform:   advice.Platform(kind),
	}
	if c.fileCap != nil {
		cr.FileCap = pinrule.TriOf(*c.fileCap)
	}
	return cr
}

// planCommand computes the state CMD will start in from ncclrun's own state
// and the launcher's plan, through the rule table's Command.
func planCommand(s sysRoot, c credFacts, plan Plan, kind Platform) cmdPlan {
	p := cmdPlan{cred: credential(c, kind)}
	p.cmd.Memlock, p.cmd.MemlockKnown = c.memlock, c.memlockErr == nil
	if plan.Memlock != nil {
		p.cmd.Memlock, p.cmd.MemlockKnown, p.limitPlan = *plan.Memlock, true, true
		p.cred.Plan.Memlock = true
		p.cred.Memlock = *plan.Memlock
		p.memlockRefused = memlockRefused(c, *plan.Memlock)
	}
	for _, d := range plan.DropCaps {
		if n := caps.Normalize(d); n == "IPC_LOCK" || n == "ALL" {
			p.dropped = true
		}
	}
	p.cred.Plan.DropIPCLock = p.dropped
	if plan.User != "" {
		uid, gid, err := plan.UID, plan.GID, error(nil)
		if !plan.Resolved {
			uid, gid, err = s.resolveUser(plan.User)
		}
		if err != nil {
			p.userErr = err
			p.cred.Plan.Unresolved = true
		} else {
			p.cred.Plan.User, p.cred.Plan.UID, p.cred.Plan.GID = true, uid, gid
		}
	}
	if plan.Exec != "" && s.live {
		p.execCmd = plan.Exec
		p.execFile, p.cred.Exec, p.execErr = execFileCaps(plan.Exec)
	}
	p.state = p.cred.Command()
	p.switchUID, p.lacksSetid = p.state.SwitchUser, p.state.LacksSetid
	p.cmd.UID, p.cmd.GID = p.state.UID, p.state.GID
	p.cmd.IPCLockEffective, p.cmd.Via, p.cmd.Ambient = p.state.IPCLockEffective, p.state.Via, p.state.Ambient
	return p
}

// Rules of docs/research/capabilities.md §4 as reported in details.rule
// (internal/pinrule's table).
const (
	ruleUnlimited     = pinrule.RuleUnlimited
	ruleRootIPCLock   = pinrule.RuleRootIPCLock
	ruleInherited     = pinrule.RuleInherited
	ruleCmdFileCap    = pinrule.RuleCmdFileCap
	ruleCmdCapLost    = pinrule.RuleCmdCapLost
	ruleAmbient       = pinrule.RuleAmbient
	ruleFinite        = pinrule.RuleFinite
	ruleUserNS        = pinrule.RuleUserNS
	ruleLimitZero     = pinrule.RuleLimitZero
	ruleNNPFileCap    = pinrule.RuleNNPFileCap
	ruleK8sTrap       = pinrule.RuleK8sTrap
	ruleRootNoIPCLock = pinrule.RuleRootNoIPCLock
	ruleNoIPCLock     = pinrule.RuleNoIPCLock
	ruleDropped       = pinrule.RuleDropped
	ruleNoSetid       = pinrule.RuleNoSetid
	ruleUnknown       = pinrule.RuleUnknown
)

func fmtLimit(r Rlimit) string {
	if r.Soft == r.Hard {
		return units.FormatSize(r.Soft) + " (soft=hard)"
	}
	return fmt.Sprintf("%s (soft; hard %s)", units.FormatSize(r.Soft), units.FormatSize(r.Hard))
}

// raiseFix says how to raise RLIMIT_MEMLOCK on each platform; on
// Kubernetes also per pod through NRI (advice.PodMemlock), the one way
// that needs no capability, for baseline and restricted namespaces.
func raiseFix(kind Platform) string {
	t := advice.Text(advice.RaiseMemlock, advice.Platform(kind), advice.Who{})
	if advice.Platform(kind) == advice.Kubernetes {
		t += "; or " + advice.Text(advice.PodMemlock, advice.Kubernetes, advice.Who{})
	}
	return t
}

// memlockVerdict is the table's decision with its words.
type memlockVerdict struct {
	rule    string
	status  Status
	summary string
	fix     string
	judged  bool
	cause   bool // the capability state is why memlock fails
}

// fixText joins the row's fixes in its order.
func fixText(fixes []advice.Fix, kind Platform, w advice.Who) string {
	parts := make([]string, 0, len(fixes))
	for _, f := range fixes {
		if f == advice.RaiseMemlock {
			parts = append(parts, raiseFix(kind))
			continue
		}
		parts = append(parts, advice.Text(f, advice.Platform(kind), w))
	}
	return strings.Join(parts, "; or ")
}

func decideMemlock(c credFacts, p cmdPlan, min int64, kind Platform, rdma bool, judge bool) memlockVerdict {
	cred := p.cred
	cred.RDMA, cred.Judge = pinrule.TriOf(rdma), judge
	pv := pinrule.Decide(cred, min)
	v := wordMemlock(c, p, pv, min, kind)
	v.rule, v.judged, v.cause = pv.Rule, pv.Judged, pv.CapabilityCause
	if !pv.Judged {
		what := "it would pass"
		if v.status == Fail {
			what = "it would fail"
		} else if v.status == Warn {
			what = "it would warn"
		}
		v.summary = fmt.Sprintf("Not judged: no RDMA device, so NCCL uses sockets and registers no memory, and RLIMIT_MEMLOCK does not matter (with an HCA %s: %s; --min-memlock judges it anyway)", what, lowerFirst(v.summary))
		v.fix = ""
	}
	v.status = pv.Status
	return v
}

// wordMemlock writes the summary and fix of the row the table chose.
func wordMemlock(c credFacts, p cmdPlan, pv pinrule.Verdict, min int64, kind Platform) memlockVerdict {
	lim := p.cmd.Memlock
	st := c.status
	cmdUID := p.cmd.UID
	who := fmt.Sprintf("uid %d", cmdUID)
	if cmdUID == 0 {
		who = "root"
	}
	w := advice.Who{UID: cmdUID, GID: p.cmd.GID}
	limWord := "RLIMIT_MEMLOCK is " + fmtLimit(lim)
	if p.limitPlan {
		limWord = "RLIMIT_MEMLOCK for CMD is " + fmtLimit(lim) + " (--memlock)"
	}
	cannot := ": NCCL cannot register memory (ibv_reg_mr fails with Cannot allocate memory)"
	v := memlockVerdict{status: pv.RowStatus}
	fix := fixText(pv.Fixes, kind, w)
	switch pv.Rule {
	case ruleUnlimited:
		v.summary = limWord + ": NCCL can register memory"
	case ruleAmbient:
		v.summary = fmt.Sprintf("%s but ncclrun starts CMD (%s) with CAP_IPC_LOCK in its ambient set, so the limit is not enforced", limWord, who)
	case ruleRootIPCLock:
		v.summary = fmt.Sprintf("%s but CMD (root) holds CAP_IPC_LOCK effective, so the limit is not enforced", limWord)
	case ruleInherited:
		v.summary = fmt.Sprintf("%s but CMD (%s) inherits CAP_IPC_LOCK from the ambient set, so the limit is not enforced", limWord, who)
	case ruleCmdFileCap:
		v.summary = fmt.Sprintf("%s but CMD (%s) gets CAP_IPC_LOCK effective from the file capability of %s, so the limit is not enforced", limWord, who, p.execWord())
	case ruleUnknown:
		v.fix = fix
		switch {
		case c.memlockErr != nil:
			tail := " and CMD will not hold CAP_IPC_LOCK"
			if c.statusErr != nil {
				tail = "; the credentials could not be read either"
			}
			v.summary = fmt.Sprintf("RLIMIT_MEMLOCK could not be read (%v)%s", c.memlockErr, tail)
		case lim.Soft >= min:
			v.summary = fmt.Sprintf("%s, enough for the %s minimum; the credentials could not be read (%v)", limWord, units.FormatSize(min), c.statusErr)
		default:
			v.summary = fmt.Sprintf("%s, below the %s minimum, and the credentials could not be read (%v), so whether CAP_IPC_LOCK bypasses it is unknown", limWord, units.FormatSize(min), c.statusErr)
		}
	case ruleLimitZero:
		v.summary = fmt.Sprintf("%s and CMD has no CAP_IPC_LOCK: ibv_reg_mr and mlock fail with Operation not permitted (EPERM)", limWord)
		v.fix = fix
	case ruleUserNS:
		v.summary = fmt.Sprintf("%s in a user namespace, where capabilities neither bypass nor raise it%s", limWord, cannot)
		if v.status == Warn {
			v.summary = fmt.Sprintf("%s in a user namespace, where capabilities neither bypass nor raise it; NCCL recommends unlimited", limWord)
		}
		v.fix = "this is a user-namespaced container (Kubernetes `hostUsers: false`, rootless Docker or Podman): set the limit where the container is started, or use `hostUsers: true`; " + fix
	case ruleFinite:
		v.summary = fmt.Sprintf("%s: enough for the %s minimum but not unlimited, as NCCL recommends", limWord, units.FormatSize(min))
		v.fix = fix
	case ruleCmdCapLost:
		v.summary = fmt.Sprintf("%s and ncclrun hands CMD (%s) CAP_IPC_LOCK in its ambient set, but %s carries a file capability without CAP_IPC_LOCK effective, and the kernel clears the ambient set when it executes such a file%s", limWord, who, p.execWord(), cannot)
		w := advice.ShellWord(p.execFile)
		v.fix = fmt.Sprintf("remove the file capability (`setcap -r %s`), or add CAP_IPC_LOCK to the capabilities `getcap %s` shows and make them effective (`setcap cap_ipc_lock,...+ep %s`); or %s", w, w, w, fix)
	case ruleNoSetid:
		v.summary = fmt.Sprintf("%s and ncclrun cannot switch to uid %d to hand it CAP_IPC_LOCK (no CAP_SETUID/CAP_SETGID)%s", limWord, cmdUID, cannot)
		v.fix = fix
	case ruleDropped:
		v.summary = fmt.Sprintf("%s and --drop-cap removes CAP_IPC_LOCK from CMD%s", limWord, cannot)
		v.fix = "this reproduces a container without CAP_IPC_LOCK; in production " + raiseFix(kind)
	case ruleNNPFileCap:
		v.summary = fmt.Sprintf("%s and ncclrun's file capability was ignored because no_new_privs is set and the process that started ncclrun did not hold CAP_IPC_LOCK%s", limWord, cannot)
		if kind != Docker {
			// ncclrun already carries cap_ipc_lock+p: the remedy is the
			// way it is started, not another setcap.
			v.summary += "; ncclrun already carries cap_ipc_lock+p, so a shell or another program between the runtime and ncclrun is what loses it"
		}
		v.fix = fix
	case ruleK8sTrap:
		v.summary = fmt.Sprintf("%s and CAP_IPC_LOCK is in the bounding set only for %s%s", limWord, who, cannot)
		v.fix = "Kubernetes and Docker do not raise an added capability into a non-root user's ambient set (kubernetes/kubernetes#56374), so `capabilities.add: [IPC_LOCK]` or `--cap-add IPC_LOCK` has no effect for " + who
		if kind == Kubernetes {
			// The CRI spec holds it in permitted too.
			v.fix += " (the CRI runtime put IPC_LOCK in the bounding, permitted and effective sets of the container's first process; a non-root exec keeps only the bounding set unless the exec'd file carries the capability, which is why ncclrun's cap_ipc_lock+p works)"
		}
		v.fix += ". Fix: " + fix
		if st.NoNewPrivs && kind == Docker {
			v.fix += ". With no_new_privs set (`--security-opt no-new-privileges`) Docker ignores a file capability on ncclrun, even as the exec-form entrypoint"
		} else if st.NoNewPrivs {
			v.fix += ". With no_new_privs set (allowPrivilegeEscalation: false) a file capability on ncclrun works only when ncclrun is the container's command in exec form"
		}
	case ruleRootNoIPCLock:
		v.summary = fmt.Sprintf("%s and root has no CAP_IPC_LOCK (not in the bounding set, as with Docker's and containerd's default capabilities)%s", limWord, cannot)
		v.fix = advice.Text(advice.AddIPCLock, advice.Platform(kind), w) + ", or " + raiseFix(kind)
	default: // ruleNoIPCLock
		v.summary = fmt.Sprintf("%s and %s has no CAP_IPC_LOCK%s", limWord, who, cannot)
		v.fix = raiseFix(kind)
		if st.NoAmbientRaise && caps.Has(st.Prm, capIPCLock) {
			v.summary = fmt.Sprintf("%s and %s has no CAP_IPC_LOCK: ncclrun holds it, but SECBIT_NO_CAP_AMBIENT_RAISE is set, so it cannot hand it to CMD as an ambient capability%s", limWord, who, cannot)
			v.fix += "; or start ncclrun without SECBIT_NO_CAP_AMBIENT_RAISE (systemd `SecureBits=`)"
			break
		}
		if st.NoRoot && cmdUID == 0 {
			v.summary = fmt.Sprintf("%s and root has no CAP_IPC_LOCK: SECBIT_NOROOT is set, so root gains no capabilities at exec%s", limWord, cannot)
			v.fix += "; or start ncclrun with CAP_IPC_LOCK in its ambient set (systemd `AmbientCapabilities=CAP_IPC_LOCK`, `setpriv --inh-caps +ipc_lock --ambient-caps +ipc_lock`), which root keeps under SECBIT_NOROOT"
			break
		}
		if cmdUID != 0 && c.fileCap != nil && *c.fileCap && !caps.Has(st.Bnd, capIPCLock) {
			// The file capability is there; the kernel grants it only
			// within the bounding set (pP' = fP & X).
			v.summary += "; ncclrun carries cap_ipc_lock+p, but the kernel grants a file capability only within the bounding set, which lacks IPC_LOCK"
			v.fix = "add IPC_LOCK to the container's capabilities (`docker run --cap-add IPC_LOCK`, Kubernetes `securityContext.capabilities.add: [IPC_LOCK]`), which makes ncclrun's cap_ipc_lock+p work; or " + v.fix
			break
		}
		if cmdUID != 0 && kind != Host && kind != Slurm {
			v.fix += "; or " + advice.Text(advice.Ambient, advice.Platform(kind), w)
		}
	}
	return v
}

// unrestricted reports whether a bounding set is a host's full set (it holds
// CAP_SYS_MODULE and CAP_SYS_ADMIN, which containers do not get) rather than
// a container's chosen list: a non-root process with a full bounding set is
// an ordinary user (row 10), not one whose added IPC_LOCK was lost (row 8).
func unrestricted(bnd uint64) bool {
	const capSysModule, capSysAdmin = 16, 21
	return caps.Has(bnd, capSysModule) && caps.Has(bnd, capSysAdmin)
}

func rlimitDetail(v int64) int64 {
	if v < 0 {
		return Unlimited
	}
	return v
}

// checkMemlock builds the memlock result and returns the verdict for the
// capabilities check.
func checkMemlock(s sysRoot, opts Options, c credFacts, p cmdPlan, kind Platform) (Result, memlockVerdict) {
	min := opts.MinMemlock
	if min <= 0 {
		min = DefaultMinMemlock
	}
	devs, _ := s.list("sys/class/infiniband")
	// Memlock matters only where NCCL registers memory
	// with an HCA, unless the user asked for the verdict: --min-memlock,
	// --probe, or --memlock/--drop-cap IPC_LOCK reproducing a container.
	judge := opts.MinMemlock > 0 || opts.Probe > 0 || p.limitPlan || p.dropped
	v := decideMemlock(c, p, min, kind, len(devs) > 0, judge)
	before := c.memlock
	if opts.MemlockBefore != nil {
		before = *opts.MemlockBefore
	}
	d := map[string]any{
		"soft":        rlimitDetail(c.memlock.Soft),
		"hard":        rlimitDetail(c.memlock.Hard),
		"soft_before": rlimitDetail(before.Soft),
		"hard_before": rlimitDetail(before.Hard),
		"min_bytes":   min,
		"rule":        v.rule,
	}
	if c.memlockErr != nil {
		// Unknown, not 0: a 0/0 limit reads as "nothing can be pinned".
		d["soft"], d["hard"] = nil, nil
		if opts.MemlockBefore == nil {
			d["soft_before"], d["hard_before"] = nil, nil
		}
	}
	if c.memlockErr != nil {
		d["error"] = c.memlockErr.Error()
	}
	if !v.judged {
		d["not_judged"] = "no RDMA device"
	}
	if c.raise != "" {
		d["raise"] = c.raise
	}
	if p.limitPlan {
		d["command_soft"] = rlimitDetail(p.cmd.Memlock.Soft)
		d["command_hard"] = rlimitDetail(p.cmd.Memlock.Hard)
	}
	if opts.MemlockBefore != nil && before != c.memlock && c.memlockErr == nil {
		v.summary += fmt.Sprintf(" (raised from %s)", fmtLimit(before))
	}
	res := Result{ID: IDMemlock, Status: v.status, Summary: v.summary, Fix: v.fix, Details: d}
	if opts.Probe > 0 {
		// What the probe gave is said in the summary too, so that doctor's
		// table shows it ran, or why not.
		switch {
		case !s.live:
			d["probe"] = "skipped: --root reads a snapshot, probes need the live system"
			res.Summary += "; the probe was " + d["probe"].(string)
		case opts.Prober == nil:
			d["probe"] = "skipped: no prober was given"
			res.Summary += "; the probe was " + d["probe"].(string)
		default:
			d["probe_bytes"] = opts.Probe
			err := opts.Prober(opts.Probe)
			d["probe_ok"] = err == nil
			if err != nil {
				d["probe_error"] = err.Error()
				res.Status = Fail
				res.Summary = fmt.Sprintf("Pinning %s with mlock(2) under CMD's credentials failed (%v); %s", units.FormatSize(opts.Probe), err, lowerFirst(v.summary))
				if res.Fix == "" {
					res.Fix = raiseFix(kind)
				}
			} else if res.Status == Fail && opts.Probe >= min {
				res.Status = Warn
				res.Summary = fmt.Sprintf("Pinning %s under CMD's credentials worked although %s", units.FormatSize(opts.Probe), lowerFirst(v.summary))
			} else {
				res.Summary += fmt.Sprintf("; pinning %s with mlock(2) under CMD's credentials worked", units.FormatSize(opts.Probe))
			}
		}
	}
	return res, v
}

func lowerFirst(s string) string {
	if s == "" || strings.HasPrefix(s, "RLIMIT") || strings.HasPrefix(s, "CAP_") {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}

// checkCapabilities reports ncclrun's own capability state and CMD's.
func checkCapabilities(c credFacts, p cmdPlan, v memlockVerdict, kind Platform) Result {
	st := c.status
	d := map[string]any{
		"command": p.cmd,
		"rule":    v.rule,
	}
	if c.usernsErr == nil {
		d["user_namespace"] = c.userns
	} else {
		d["user_namespace_error"] = c.usernsErr.Error()
	}
	if c.statusErr != nil {
		d["error"] = c.statusErr.Error()
		return Result{ID: IDCapabilities, Status: Warn,
			Summary: fmt.Sprintf("ncclrun's credentials could not be read: %v", c.statusErr), Details: d}
	}
	d["uid"] = st.UID
	d["gid"] = st.GID
	d["no_new_privs"] = st.NoNewPrivs
	if st.NoRoot {
		d["secbit_noroot"] = true
	}
	if st.NoAmbientRaise {
		d["secbit_no_cap_ambient_raise"] = true
	}
	d["ipc_lock"] = st.sets(capIPCLock)
	d["sys_resource"] = st.sets(capSysResource)
	if c.fileCap != nil {
		d["file_capability"] = *c.fileCap
	}
	if p.execFile != "" {
		// The file the kernel runs for CMD and whether its file
		// capability decides CMD's CAP_IPC_LOCK.
		file := map[string]any{"path": p.execFile, "file_capability": p.cred.Exec.FileCap}
		if p.execErr != nil {
			file["error"] = p.execErr.Error()
		}
		d["command_file"] = file
	}
	if p.userErr != nil {
		d["user_error"] = p.userErr.Error()
		return Result{ID: IDCapabilities, Status: Fail,
			Summary: fmt.Sprintf("--user cannot be resolved: %v", p.userErr),
			Fix:     "name a user that exists in the image's /etc/passwd, or give numeric UID:GID", Details: d}
	}
	var own []string
	own = append(own, fmt.Sprintf("ncclrun runs as uid %d", st.UID))
	if st.NoNewPrivs {
		own = append(own, "with no_new_privs")
	}
	if st.NoRoot {
		own = append(own, "with SECBIT_NOROOT (root gains no capabilities at exec)")
	}
	if st.NoAmbientRaise {
		own = append(own, "with SECBIT_NO_CAP_AMBIENT_RAISE (no ambient capability can be raised)")
	}
	if c.userns {
		own = append(own, "in a user namespace")
	}
	ownText := strings.Join(own, " ") + " with CAP_IPC_LOCK " + setsText(st.sets(capIPCLock))
	var cmdText string
	switch p.cmd.Via {
	case "ambient":
		cmdText = fmt.Sprintf("CMD (uid %d) gets CAP_IPC_LOCK through its ambient set", p.cmd.UID)
	case "inherited":
		cmdText = fmt.Sprintf("CMD (uid %d) keeps CAP_IPC_LOCK effective", p.cmd.UID)
	case "file":
		cmdText = fmt.Sprintf("CMD (uid %d) gets CAP_IPC_LOCK from the file capability of %s", p.cmd.UID, p.execWord())
	default:
		cmdText = fmt.Sprintf("CMD (uid %d) will not hold CAP_IPC_LOCK", p.cmd.UID)
		if c.userns && caps.Has(st.Bnd, capIPCLock) {
			cmdText += " that counts (capabilities in a user namespace do not bypass RLIMIT_MEMLOCK)"
		}
		if p.state.LostAtExec {
			cmdText += ": the file capability of " + p.execWord() + " clears the ambient set at its exec"
		}
	}
	r := Result{ID: IDCapabilities, Status: OK, Summary: ownText + "; " + cmdText, Details: d}
	if p.memlockRefused != "" {
		r.Status = Fail
		r.Summary = p.memlockRefused + ": ncclrun run will not start CMD (exit 125)"
		r.Fix = fmt.Sprintf("give --memlock a hard limit of at most %s (`--memlock SOFT:HARD`), or raise the limit where ncclrun is started", units.FormatSize(c.memlock.Hard))
		return r
	}
	if p.lacksSetid {
		r.Status = Fail
		r.Summary = fmt.Sprintf("ncclrun (uid %d) must switch CMD to uid %d gid %d but lacks CAP_SETUID or CAP_SETGID", st.UID, p.cmd.UID, p.cmd.GID)
		r.Fix = advice.Text(advice.AddSetid, advice.Platform(kind), advice.Who{})
		return r
	}
	if v.cause {
		// The capabilities verdict follows the memlock
		// decision; one cause makes one failure, so this one warns.
		r.Status = Warn
		r.Fix = v.fix
	}
	return r
}

func setsText(cs CapSets) string {
	var in []string
	for _, x := range []struct {
		on   bool
		name string
	}{{cs.Effective, "effective"}, {cs.Permitted, "permitted"}, {cs.Inheritable, "inheritable"}, {cs.Bounding, "bounding"}, {cs.Ambient, "ambient"}} {
		if x.on {
			in = append(in, x.name)
		}
	}
	if len(in) == 0 {
		return "in no set"
	}
	return "in " + strings.Join(in, ", ")
}
