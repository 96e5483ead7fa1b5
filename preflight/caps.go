package preflight

import (
	"bytes"
	"fmt"
	"os"
	"strings"

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
	// raiseSimulated: a snapshot's soft limit was below its hard limit and
	// memlock holds the values after the raise ncclrun run would do.
	raiseSimulated bool
}

func gatherCreds(s sysRoot) credFacts {
	var c credFacts
	if s.live {
		c.status, c.statusErr = liveStatus()
		c.memlock, c.memlockErr = liveMemlock()
		if exe, err := os.Executable(); err == nil {
			if fc, err := fileCaps(exe); err == nil {
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
	dropped    bool  // --drop-cap removes CAP_IPC_LOCK
	switchUID  bool  // --user changes uid or gid
	lacksSetid bool  // switching needs CAP_SETUID+CAP_SETGID, ncclrun lacks one
	userErr    error // --user could not be resolved
	limitPlan  bool  // Plan.Memlock overrides the limit
}

// normCap turns "cap_ipc_lock", "CAP_IPC_LOCK" or "ipc_lock" into "IPC_LOCK".
func normCap(s string) string {
	s = strings.ToUpper(strings.TrimSpace(s))
	return strings.TrimPrefix(s, "CAP_")
}

// planCommand computes the state CMD will start in from ncclrun's own state
// and the launcher's plan (docs/research/capabilities.md §1.7, §3, §4).
func planCommand(s sysRoot, c credFacts, plan Plan) cmdPlan {
	st := c.status
	p := cmdPlan{cmd: CommandState{UID: st.UID, GID: st.GID, Via: "none", Memlock: c.memlock}}
	if plan.Memlock != nil {
		p.cmd.Memlock, p.limitPlan = *plan.Memlock, true
	}
	for _, d := range plan.DropCaps {
		if n := normCap(d); n == "IPC_LOCK" || n == "ALL" {
			p.dropped = true
		}
	}
	if plan.User != "" {
		uid, gid, err := plan.UID, plan.GID, error(nil)
		if !plan.Resolved {
			uid, gid, err = s.resolveUser(plan.User)
		}
		if err != nil {
			p.userErr = err
		} else {
			p.switchUID = uid != st.UID || gid != st.GID
			p.cmd.UID, p.cmd.GID = uid, gid
		}
	}
	if c.statusErr != nil || p.userErr != nil {
		return p
	}
	if p.switchUID && !(hasCap(st.Eff, capSetuid) && hasCap(st.Eff, capSetgid)) {
		p.lacksSetid = true
		return p
	}
	ipc := st.sets(capIPCLock)
	switch {
	case p.dropped, c.userns:
		// Dropped on purpose, or useless: capable() checks the initial
		// user namespace (kernel/capability.c).
	case p.cmd.UID == 0:
		// Root after execve: P' = bounding | inheritable.
		if ipc.Bounding || ipc.Inheritable {
			p.cmd.IPCLockEffective, p.cmd.Via = true, "inherited"
		}
	case !p.switchUID && ipc.Effective && ipc.Ambient:
		p.cmd.IPCLockEffective, p.cmd.Via = true, "inherited"
	case ipc.Permitted && (ipc.Bounding || ipc.Inheritable):
		// PR_CAP_AMBIENT_RAISE needs the cap in P and I; capset may add
		// it to I only when it is in the bounding set or already in I.
		p.cmd.IPCLockEffective, p.cmd.Via, p.cmd.Ambient = true, "ambient", true
	}
	return p
}

// Rules of docs/research/capabilities.md §4 as reported in details.rule.
const (
	ruleUnlimited     = "unlimited"           // row 1
	ruleRootIPCLock   = "root-ipc-lock"       // row 2
	ruleInherited     = "ambient-inherited"   // row 3
	ruleAmbient       = "ambient-raise"       // rows 6, 7
	ruleFinite        = "finite"              // row 4/5 outcome: enough, not unlimited
	ruleUserNS        = "userns"              // row 11
	ruleLimitZero     = "limit-zero"          // row 12
	ruleNNPFileCap    = "nnp-file-cap"        // row 7b
	ruleK8sTrap       = "k8s-trap"            // row 8
	ruleRootNoIPCLock = "root-no-ipc-lock"    // row 9
	ruleNoIPCLock     = "no-ipc-lock"         // row 10
	ruleDropped       = "dropped"             // --drop-cap IPC_LOCK
	ruleNoSetid       = "no-setuid"           // --user without CAP_SETUID/SETGID
	ruleUnknown       = "unknown-credentials" // status unreadable
)

func fmtLimit(r Rlimit) string {
	if r.Soft == r.Hard {
		return units.FormatSize(r.Soft) + " (soft=hard)"
	}
	return fmt.Sprintf("%s (soft; hard %s)", units.FormatSize(r.Soft), units.FormatSize(r.Hard))
}

// raiseFix says how to raise RLIMIT_MEMLOCK on each platform
// (docs/research/capabilities.md §5).
func raiseFix(kind string) string {
	switch kind {
	case "kubernetes":
		return "Kubernetes has no ulimit field yet, so raise the limit pods inherit from the runtime on the node: a systemd drop-in /etc/systemd/system/containerd.service.d/memlock.conf (or crio.service.d) with `[Service] LimitMEMLOCK=infinity`, then `systemctl daemon-reload && systemctl restart containerd`; CRI-O alternatively `default_ulimits = [\"memlock=-1:-1\"]`"
	case "docker":
		return "start the container with `docker run --ulimit memlock=-1:-1` (compose: `ulimits: {memlock: {soft: -1, hard: -1}}`; for all containers: `\"default-ulimits\": {\"memlock\": {\"Name\": \"memlock\", \"Soft\": -1, \"Hard\": -1}}` in /etc/docker/daemon.json)"
	case "slurm":
		return "set `PropagateResourceLimitsExcept=MEMLOCK` in slurm.conf and run slurmd with `LimitMEMLOCK=infinity` (check: `grep 'locked memory' /proc/$(pidof slurmd)/limits`); per job `ulimit -l unlimited` works only where the hard limit allows it"
	default:
		return "set `* soft memlock unlimited` and `* hard memlock unlimited` in /etc/security/limits.d/90-rdma.conf (login and ssh sessions) and `LimitMEMLOCK=infinity` in the unit of a systemd service"
	}
}

// ambientFix says how to let ncclrun hand CAP_IPC_LOCK to a non-root CMD.
func ambientFix(kind string, uid, gid int) string {
	switch kind {
	case "kubernetes":
		return fmt.Sprintf("run the container as root with `securityContext: {runAsUser: 0, allowPrivilegeEscalation: false, capabilities: {drop: [ALL], add: [IPC_LOCK, SETUID, SETGID]}}` and start `ncclrun --user=%d:%d -- ...`, so ncclrun gives CMD CAP_IPC_LOCK as an ambient capability; or `setcap cap_ipc_lock+p` on ncclrun in the image (+p, never +ep) with `capabilities.add: [IPC_LOCK]`", uid, gid)
	case "docker":
		return fmt.Sprintf("run the container as root with `--cap-add IPC_LOCK` and start `ncclrun --user=%d:%d -- ...`, so ncclrun gives CMD CAP_IPC_LOCK as an ambient capability; or `setcap cap_ipc_lock+p` on ncclrun in the image (+p, never +ep) and keep `--cap-add IPC_LOCK`", uid, gid)
	default:
		return "`setcap cap_ipc_lock+p` on the ncclrun binary (+p, never +ep), so ncclrun gives CMD CAP_IPC_LOCK as an ambient capability"
	}
}

func addCapFix(kind string) string {
	switch kind {
	case "kubernetes":
		return "add the capability to the root container: `securityContext: {capabilities: {add: [IPC_LOCK]}}`"
	case "docker":
		return "add the capability to the root container: `docker run --cap-add IPC_LOCK`"
	default:
		return "give the process CAP_IPC_LOCK"
	}
}

// memlockVerdict is the decision of docs/research/capabilities.md §4.
type memlockVerdict struct {
	rule    string
	status  Status
	summary string
	fix     string
}

func decideMemlock(c credFacts, p cmdPlan, min int64, kind string) memlockVerdict {
	lim := p.cmd.Memlock
	st := c.status
	ipc := st.sets(capIPCLock)
	cmdUID := p.cmd.UID
	who := fmt.Sprintf("uid %d", cmdUID)
	if cmdUID == 0 {
		who = "root"
	}
	limWord := "RLIMIT_MEMLOCK is " + fmtLimit(lim)
	if p.limitPlan {
		limWord = "RLIMIT_MEMLOCK for CMD is " + fmtLimit(lim) + " (--memlock)"
	}
	cannot := ": NCCL cannot register memory (ibv_reg_mr fails with Cannot allocate memory)"
	switch {
	case lim.Soft == Unlimited && c.memlockErr == nil:
		return memlockVerdict{rule: ruleUnlimited, status: OK, summary: limWord + ": NCCL can register memory"}
	case p.cmd.IPCLockEffective:
		v := memlockVerdict{status: OK}
		switch {
		case p.cmd.Via == "ambient":
			v.rule = ruleAmbient
			v.summary = fmt.Sprintf("%s but ncclrun starts CMD (%s) with CAP_IPC_LOCK in its ambient set, so the limit is not enforced", limWord, who)
		case cmdUID == 0:
			v.rule = ruleRootIPCLock
			v.summary = fmt.Sprintf("%s but CMD (root) holds CAP_IPC_LOCK effective, so the limit is not enforced", limWord)
		default:
			v.rule = ruleInherited
			v.summary = fmt.Sprintf("%s but CMD (%s) inherits CAP_IPC_LOCK from the ambient set, so the limit is not enforced", limWord, who)
		}
		return v
	case c.memlockErr != nil:
		tail := " and CMD will not hold CAP_IPC_LOCK"
		if c.statusErr != nil {
			tail = "; the credentials could not be read either"
		}
		return memlockVerdict{rule: ruleUnknown, status: Warn, summary: fmt.Sprintf("RLIMIT_MEMLOCK could not be read (%v)%s", c.memlockErr, tail), fix: raiseFix(kind)}
	case c.statusErr != nil:
		if lim.Soft >= min {
			return memlockVerdict{rule: ruleUnknown, status: Warn, summary: fmt.Sprintf("%s, enough for the %s minimum; the credentials could not be read (%v)", limWord, units.FormatSize(min), c.statusErr), fix: raiseFix(kind)}
		}
		return memlockVerdict{rule: ruleUnknown, status: Warn, summary: fmt.Sprintf("%s, below the %s minimum, and the credentials could not be read (%v), so whether CAP_IPC_LOCK bypasses it is unknown", limWord, units.FormatSize(min), c.statusErr), fix: raiseFix(kind)}
	case lim.Soft == 0:
		return memlockVerdict{rule: ruleLimitZero, status: Fail,
			summary: fmt.Sprintf("%s and CMD has no CAP_IPC_LOCK: ibv_reg_mr and mlock fail with Operation not permitted (EPERM)", limWord),
			fix:     raiseFix(kind)}
	case c.userns:
		v := memlockVerdict{rule: ruleUserNS, status: Fail,
			summary: fmt.Sprintf("%s in a user namespace, where capabilities neither bypass nor raise it%s", limWord, cannot),
			fix:     "this is a user-namespaced container (Kubernetes `hostUsers: false`, rootless Docker or Podman): set the limit where the container is started, or use `hostUsers: true`; " + raiseFix(kind)}
		if lim.Soft >= min {
			v.status, v.summary = Warn, fmt.Sprintf("%s in a user namespace, where capabilities neither bypass nor raise it; NCCL recommends unlimited", limWord)
		}
		return v
	case lim.Soft >= min:
		return memlockVerdict{rule: ruleFinite, status: Warn,
			summary: fmt.Sprintf("%s: enough for the %s minimum but not unlimited, as NCCL recommends", limWord, units.FormatSize(min)),
			fix:     raiseFix(kind)}
	case p.lacksSetid:
		return memlockVerdict{rule: ruleNoSetid, status: Fail,
			summary: fmt.Sprintf("%s and ncclrun cannot switch to uid %d to hand it CAP_IPC_LOCK (no CAP_SETUID/CAP_SETGID)%s", limWord, cmdUID, cannot),
			fix:     "add SETUID and SETGID to the container's capabilities (Kubernetes: `capabilities.add: [IPC_LOCK, SETUID, SETGID]`), or " + raiseFix(kind)}
	case p.dropped:
		return memlockVerdict{rule: ruleDropped, status: Fail,
			summary: fmt.Sprintf("%s and --drop-cap removes CAP_IPC_LOCK from CMD%s", limWord, cannot),
			fix:     "this reproduces a container without CAP_IPC_LOCK; in production " + raiseFix(kind)}
	case cmdUID != 0 && ipc.Bounding && !ipc.Permitted && !unrestricted(st.Bnd) && st.NoNewPrivs && c.fileCap != nil && *c.fileCap:
		v := memlockVerdict{rule: ruleNNPFileCap, status: Fail,
			summary: fmt.Sprintf("%s and ncclrun's file capability was ignored because no_new_privs is set and the process that started ncclrun did not hold CAP_IPC_LOCK%s", limWord, cannot),
			fix:     "make ncclrun the container's command in exec form (no shell in between; runc then execs it holding CAP_IPC_LOCK) or set `allowPrivilegeEscalation: false` to true; otherwise " + ambientFix(kind, cmdUID, p.cmd.GID) + "; or " + raiseFix(kind)}
		if kind == "docker" {
			// Seen on a real engine (docs/containers.md): Docker puts a
			// non-root user's added capabilities in the bounding set only,
			// so runc-init never holds IPC_LOCK and no_new_privs blocks the
			// file capability even when ncclrun is the exec-form entrypoint.
			v.fix = "Docker gives a non-root user's added capabilities to the bounding set only, so under `--security-opt no-new-privileges` the file capability on ncclrun is ignored however ncclrun is started: drop `no-new-privileges`; or " + fmt.Sprintf("run the container as root with `--cap-add IPC_LOCK` (and SETUID, SETGID if you drop ALL) and start `ncclrun --user=%d:%d -- ...`, so ncclrun gives CMD CAP_IPC_LOCK as an ambient capability", cmdUID, p.cmd.GID) + "; or " + raiseFix(kind)
		}
		return v
	case cmdUID != 0 && ipc.Bounding && !ipc.Permitted && !unrestricted(st.Bnd):
		v := memlockVerdict{rule: ruleK8sTrap, status: Fail,
			summary: fmt.Sprintf("%s and CAP_IPC_LOCK is in the bounding set only for %s%s", limWord, who, cannot),
			fix:     "Kubernetes and Docker do not raise an added capability into a non-root user's ambient set (kubernetes/kubernetes#56374), so `capabilities.add: [IPC_LOCK]` or `--cap-add IPC_LOCK` has no effect for " + who + ". Fix: " + ambientFix(kind, cmdUID, p.cmd.GID) + "; or " + raiseFix(kind)}
		if st.NoNewPrivs && kind == "docker" {
			v.fix += ". With no_new_privs set (`--security-opt no-new-privileges`) Docker ignores a file capability on ncclrun, even as the exec-form entrypoint"
		} else if st.NoNewPrivs {
			v.fix += ". With no_new_privs set (allowPrivilegeEscalation: false) a file capability on ncclrun works only when ncclrun is the container's command in exec form"
		}
		return v
	case cmdUID == 0 && !ipc.Bounding:
		return memlockVerdict{rule: ruleRootNoIPCLock, status: Fail,
			summary: fmt.Sprintf("%s and root has no CAP_IPC_LOCK (not in the bounding set, as with Docker's and containerd's default capabilities)%s", limWord, cannot),
			fix:     addCapFix(kind) + ", or " + raiseFix(kind)}
	default:
		fix := raiseFix(kind)
		if cmdUID != 0 && kind != "host" && kind != "slurm" {
			fix += "; or " + ambientFix(kind, cmdUID, p.cmd.GID)
		}
		return memlockVerdict{rule: ruleNoIPCLock, status: Fail,
			summary: fmt.Sprintf("%s and %s has no CAP_IPC_LOCK%s", limWord, who, cannot),
			fix:     fix}
	}
}

// unrestricted reports whether a bounding set is a host's full set (it holds
// CAP_SYS_MODULE and CAP_SYS_ADMIN, which containers do not get) rather than
// a container's chosen list: a non-root process with a full bounding set is
// an ordinary user (row 10), not one whose added IPC_LOCK was lost (row 8).
func unrestricted(bnd uint64) bool {
	const capSysModule, capSysAdmin = 16, 21
	return hasCap(bnd, capSysModule) && hasCap(bnd, capSysAdmin)
}

func rlimitDetail(v int64) int64 {
	if v < 0 {
		return Unlimited
	}
	return v
}

// checkMemlock builds the memlock result and returns the verdict for the
// capabilities check.
func checkMemlock(opts Options, c credFacts, p cmdPlan, kind string) (Result, memlockVerdict) {
	min := opts.MinMemlock
	if min <= 0 {
		min = DefaultMinMemlock
	}
	v := decideMemlock(c, p, min, kind)
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
		d["error"] = c.memlockErr.Error()
	}
	if c.raiseSimulated {
		d["raise"] = "simulated: ncclrun run raises the soft limit to the hard limit"
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
		switch {
		case !newRoot(opts.Root).live:
			d["probe"] = "skipped: --root reads a snapshot, probes need the live system"
		case opts.Prober == nil:
			d["probe"] = "skipped: no prober was given"
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
func checkCapabilities(c credFacts, p cmdPlan, v memlockVerdict, kind string) Result {
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
	d["ipc_lock"] = st.sets(capIPCLock)
	d["sys_resource"] = st.sets(capSysResource)
	if c.fileCap != nil {
		d["file_capability"] = *c.fileCap
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
	default:
		cmdText = fmt.Sprintf("CMD (uid %d) will not hold CAP_IPC_LOCK", p.cmd.UID)
		if c.userns && hasCap(st.Bnd, capIPCLock) {
			cmdText += " that counts (capabilities in a user namespace do not bypass RLIMIT_MEMLOCK)"
		}
	}
	r := Result{ID: IDCapabilities, Status: OK, Summary: ownText + "; " + cmdText, Details: d}
	if p.lacksSetid {
		r.Status = Fail
		r.Summary = fmt.Sprintf("ncclrun (uid %d) must switch CMD to uid %d gid %d but lacks CAP_SETUID or CAP_SETGID", st.UID, p.cmd.UID, p.cmd.GID)
		r.Fix = "add SETUID and SETGID to the container's capabilities (Kubernetes: `capabilities.add: [IPC_LOCK, SETUID, SETGID]`)"
		return r
	}
	if v.status == Fail {
		switch v.rule {
		case ruleK8sTrap, ruleNNPFileCap, ruleRootNoIPCLock, ruleUserNS, ruleDropped:
			r.Status = Warn
			r.Fix = v.fix
		}
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
