package lint

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/ncclrun/ncclrun/internal/advice"
	"github.com/ncclrun/ncclrun/internal/pinrule"
)

// meanings is every finding id with what it means, in the order
// docs/lint.md gives them (SARIF's rules too).
var meanings = []struct{ ID, Meaning string }{
	{IDIPCLockInert, "a non-root container adds IPC_LOCK, but nothing makes it effective for the training process (Kubernetes and Docker put it in the bounding set only), so NCCL cannot pin past the runtime's memlock limit"},
	{IDNNPShell, "the file-capability ncclrun is started through a shell or other program while allowPrivilegeEscalation: false (no_new_privs): the file capability is ignored"},
	{IDNoIPCLock, "ncclrun is started for the capability hand-off (--user from root) but IPC_LOCK is not in the container's bounding set (not added, or dropped)"},
	{IDUserNeedsSetid, "ncclrun --user in a container that cannot switch users (SETUID/SETGID dropped, or not root)"},
	{IDMemlockLimit, "the manifest sets a memlock limit (Compose ulimits, the NRI annotation, securityContext.ulimits) below what NCCL needs, and nothing bypasses it (warning: enough, but not unlimited; info: securityContext.ulimits lifts it, behind the ContainerUlimits feature gate); or securityContext.ulimits holds a memlock its validation rejects"},
	{IDNRIAnnotation, "the NRI ulimit-adjuster annotation, decoded as the plugin decodes it, fails container creation (a negative or non-integer value, a missing or unknown type, hard below soft), sets memlock 0 or a missing value, or names no container of the pod"},
	{IDPodCaps, "securityContext.capabilities on the pod, where Kubernetes has no such field: kubectl refuses the manifest (strict field validation) and clients that do not validate drop the field, so no container gets the capability"},
	{IDUserNamespace, "hostUsers: false: in a user namespace capabilities neither bypass nor raise the memlock limit"},
	{IDShmDefault, "a GPU container without a memory-backed volume at /dev/shm (and no hostIPC): the runtime's 64 MiB default"},
	{IDPodSecurity, "an added capability (IPC_LOCK) that Pod Security Admission's baseline and restricted levels reject"},
	{IDNodeMemlock, "the training process holds no CAP_IPC_LOCK, so it pins only what the node's memlock limit allows: fine where the runtime's limit is unlimited (way c), else NCCL fails"},
	{IDNcclrunUsage, "ncclrun's command line holds a flag that `ncclrun run` does not take, a flag without its value, or a true/false, duration or one-of-a-few-words flag (or its NCCLRUN_* variable) with a value it refuses: ncclrun exits 2 before the command starts"},
}

// Rules lists every finding id with its severity (the most severe of its
// rows in the findings table) and meaning, in the order docs/lint.md gives
// them (SARIF's rules too).
func Rules() []struct{ ID, Severity, Meaning string } {
	rank := map[string]int{Info: 0, Warning: 1, Error: 2}
	out := make([]struct{ ID, Severity, Meaning string }, len(meanings))
	for i, m := range meanings {
		out[i].ID, out[i].Meaning, out[i].Severity = m.ID, m.Meaning, Info
		for _, r := range table {
			if r.id == m.ID && rank[r.severity] > rank[out[i].Severity] {
				out[i].Severity = r.severity
			}
		}
	}
	return out
}

// row is one row of the findings table: one id at one severity, and when
// it applies. An id whose severity depends on what the manifest shows has
// a row per severity, each with its own condition (docs/lint.md,
// "Findings"): the severity is the row's, never changed afterwards.
type row struct {
	id, severity string
	// applies says whether the row applies to the container; nil for the
	// rows whose findings are made while the manifest is read (a value the
	// apiserver, Compose or the NRI plugin refuses, a pod-level field):
	// readFinding gives those their severity.
	applies func(j *judging) bool
	line    func(j *judging) int
	message func(j *judging) string
	fix     func(j *judging) string
	// carry is what of the decision the finding carries (rule,
	// assumed); nil for none.
	carry func(j *judging) (rule string, assumed []string)
}

// judging is one container being judged: what the manifest says, the
// credentials it describes and the decision table's row for them.
type judging struct {
	c   container
	s   state
	v   pinrule.Verdict
	p   advice.Platform
	sp  advice.Spot
	k   bool // Kubernetes
	who string
	// addLine is the line of the IPC_LOCK (or ALL) item of capabilities.add.
	addLine int
}

// pins: memory pinning is judged for the container (a GPU container
// that starts, whose ncclrun does not refuse its --memlock).
func (j *judging) pins() bool {
	return j.c.gpu && !j.c.noStart && j.s.memlockRefused == nil && !j.s.memlockUsage
}

// fails and warns: the decision is that row, at that status.
func (j *judging) fails(rules ...string) bool {
	return j.pins() && j.v.Status == pinrule.Fail && slices.Contains(rules, j.v.Rule)
}

func (j *judging) warns(rules ...string) bool {
	return j.pins() && j.v.Status == pinrule.Warn && slices.Contains(rules, j.v.Rule)
}

func (j *judging) manifest(f advice.Fix) string { return advice.Manifest(f, j.p, j.sp) }

// decided carries the decision's row and the assumptions.
func decided(j *judging) (string, []string) { return j.v.Rule, j.s.assumed }

// handOff: ncclrun is started to hand CAP_IPC_LOCK over (--user, or
// IPC_LOCK dropped by name) where there is none.
func (j *judging) handOff() bool {
	return j.c.launch.ncclrun && (j.s.cred.Plan.User || capLine(j.c.drop, "IPC_LOCK", 0) > 0)
}

// kepNote adds, to a memlock-limit message about a limit from
// securityContext.ulimits, what that field needs.
func (j *judging) kepNote(msg string) string {
	if j.c.kep {
		return msg + " Note: " + kepGate + "."
	}
	return msg
}

// nodeOrPodMemlock is the fix where the training process holds no
// capability: the node's limit first on Kubernetes, then the pod's.
func nodeOrPodMemlock(j *judging) string {
	if j.k {
		return j.manifest(advice.RaiseMemlock) + "\n" + j.manifest(advice.PodMemlock)
	}
	return j.manifest(advice.PodMemlock)
}

func podMemlock(j *judging) string { return j.manifest(advice.PodMemlock) }

// trapMessage is ipc-lock-inert's sentence for a k8s-trap decision.
func trapMessage(j *judging) string {
	switch {
	case j.c.launch.ncclrun && j.p == advice.Docker:
		return fmt.Sprintf("IPC_LOCK is added for %s, but Docker keeps it in the bounding set only and ncclrun's file capability cannot take it from there, so NCCL cannot pin past the memlock limit.", j.who)
	case j.p == advice.Docker:
		return fmt.Sprintf("IPC_LOCK is added for %s, but Docker gives a non-root user's added capabilities to the bounding set only and nothing hands it to the training process, so NCCL cannot pin past the memlock limit (ibv_reg_mr fails with Cannot allocate memory).", j.who)
	}
	return fmt.Sprintf("IPC_LOCK is added for %s, but the runtime's exec of a non-root process keeps it in the bounding set only (the CRI spec also puts it in effective and permitted; the exec drops those) and nothing hands it to the training process, so NCCL cannot pin past the memlock limit (ibv_reg_mr fails with Cannot allocate memory).", j.who)
}

func trapFix(j *judging) string {
	if j.k {
		return j.manifest(advice.Ambient) + "\n" + j.manifest(advice.PodMemlock)
	}
	return j.manifest(advice.Ambient)
}

// table is every finding lint makes, in the order a container's are
// made (a container's findings are then sorted by line, stably).
var table = []row{
	{id: IDNcclrunUsage, severity: Error,
		applies: func(j *judging) bool { return j.c.launch.bad != "" },
		line:    func(j *judging) int { return j.c.commandLine },
		message: func(j *judging) string {
			if strings.HasPrefix(j.c.launch.bad, "NCCLRUN_") {
				return fmt.Sprintf("The container's environment sets %s, a value `ncclrun run` refuses for that variable's flag, so ncclrun exits 2 before the command starts.", j.c.launch.bad)
			}
			return fmt.Sprintf("ncclrun's command line holds %q, which `ncclrun run` refuses (not its flag, a flag without its value, or a value the flag does not take), so ncclrun exits 2 before the command starts.", j.c.launch.bad)
		},
		fix: func(j *judging) string {
			return "Remove it, or spell it as `ncclrun run --help` lists it, with a value of its kind (true or false; a duration such as 90s; one of the words its help names)."
		}},
	{id: IDUserNeedsSetid, severity: Error,
		applies: func(j *judging) bool { return j.v.Command.LacksSetid && j.c.launch.userSet },
		line:    func(j *judging) int { return j.c.commandLine },
		message: func(j *judging) string {
			need := "CAP_SETUID and CAP_SETGID"
			if !j.s.root {
				need += ", which only a root container holds"
			}
			return fmt.Sprintf("ncclrun --user=%s must switch users but the container lacks %s, so ncclrun exits 125 before the command starts.", j.c.launch.user, need)
		},
		fix: func(j *judging) string { return j.manifest(advice.AddSetid) },
		carry: func(j *judging) (string, []string) {
			if j.v.Rule == pinrule.RuleNoSetid {
				return decided(j)
			}
			return "", nil
		}},
	// ncclrun --memlock above the container's hard limit without
	// CAP_SYS_RESOURCE: the row is that of a limit ncclrun does not get
	// to set, so the finding carries the assumptions only.
	{id: IDMemlockLimit, severity: Error,
		applies: func(j *judging) bool { return j.s.memlockRefused != nil },
		line:    func(j *judging) int { return j.c.commandLine },
		message: func(j *judging) string {
			from := "the node's, assumed"
			if j.c.memlock != nil {
				from = "set by " + j.c.memlockFrom + ","
			}
			return j.kepNote(fmt.Sprintf("ncclrun --memlock=%s raises the hard memlock limit above the container's (%s %s), which needs CAP_SYS_RESOURCE that ncclrun does not hold here, so ncclrun exits 125 before the command starts.",
				j.c.launch.memlock, from, fmtLimit(j.s.memlockRefused.from)))
		},
		fix:   podMemlock,
		carry: func(j *judging) (string, []string) { return "", j.s.assumed }},
	// ncclrun --memlock SOFT:HARD with soft above hard: ncclrun refuses
	// its flags and starts nothing.
	{id: IDMemlockLimit, severity: Error,
		applies: func(j *judging) bool { return j.s.memlockUsage },
		line:    func(j *judging) int { return j.c.commandLine },
		message: func(j *judging) string {
			return fmt.Sprintf("ncclrun's --memlock (or NCCLRUN_MEMLOCK) %s sets a soft limit above its hard limit, which ncclrun refuses as a usage error: it exits 2 before the command starts.", j.c.launch.memlock)
		},
		fix: func(j *judging) string {
			return "Give one size for both limits (--memlock=unlimited), or SOFT:HARD with soft at most hard."
		}},
	{id: IDIPCLockInert, severity: Error,
		applies: func(j *judging) bool { return j.fails(pinrule.RuleK8sTrap) && !j.c.entrypointDecides() },
		line:    func(j *judging) int { return j.addLine },
		message: trapMessage, fix: trapFix, carry: decided},
	// No command: the image's ENTRYPOINT runs first, and an exec-form
	// ncclrun there (Dockerfile.base) would hand the capability over.
	// The manifest cannot tell.
	{id: IDIPCLockInert, severity: Warning,
		applies: func(j *judging) bool { return j.fails(pinrule.RuleK8sTrap) && j.c.entrypointDecides() },
		line:    func(j *judging) int { return j.addLine },
		message: func(j *judging) string {
			return strings.TrimSuffix(trapMessage(j), ".") + ", unless the image's ENTRYPOINT is ncclrun in exec form (Dockerfile.base; `docker inspect --format '{{.Config.Entrypoint}}' IMAGE` shows it)."
		},
		fix: trapFix, carry: decided},
	{id: IDNNPShell, severity: Error,
		applies: func(j *judging) bool { return j.fails(pinrule.RuleNNPFileCap) && j.k },
		line:    func(j *judging) int { return j.c.commandLine },
		message: func(j *judging) string {
			return fmt.Sprintf("ncclrun is started through %s while allowPrivilegeEscalation: false sets no_new_privs, so the kernel ignores its cap_ipc_lock+p file capability and NCCL cannot pin past the memlock limit.", j.c.launch.via)
		},
		fix: func(j *judging) string { return j.manifest(advice.ExecForm) }, carry: decided},
	{id: IDIPCLockInert, severity: Error,
		applies: func(j *judging) bool { return j.fails(pinrule.RuleNNPFileCap) && !j.k },
		line:    func(j *judging) int { return line2(j.c.nnpLine, j.addLine) },
		message: func(j *judging) string {
			return fmt.Sprintf("IPC_LOCK is added for %s under no-new-privileges: Docker keeps it in the bounding set only, so no_new_privs makes the kernel ignore ncclrun's file capability even in exec form.", j.who)
		},
		fix: func(j *judging) string { return j.manifest(advice.ExecForm) }, carry: decided},
	{id: IDNoIPCLock, severity: Error,
		applies: func(j *judging) bool { return j.fails(pinrule.RuleDropped) },
		line:    func(j *judging) int { return j.c.commandLine },
		message: func(*judging) string {
			return "ncclrun --drop-cap removes CAP_IPC_LOCK from the command, so NCCL cannot pin past the memlock limit."
		},
		fix: podMemlock, carry: decided},
	{id: IDNoIPCLock, severity: Error,
		applies: func(j *judging) bool { return j.fails(pinrule.RuleNoIPCLock, pinrule.RuleRootNoIPCLock) && j.handOff() },
		line:    func(j *judging) int { return line2(capLine(j.c.drop, "IPC_LOCK", 0), j.c.commandLine) },
		message: func(j *judging) string {
			return fmt.Sprintf("ncclrun is started to hand CAP_IPC_LOCK to the training process, but IPC_LOCK is not in the container's capabilities (%s), so there is nothing to hand over.", dropWords(j.c))
		},
		fix: func(j *judging) string { return j.manifest(advice.AddIPCLock) }, carry: decided},
	{id: IDNodeMemlock, severity: Info,
		applies: func(j *judging) bool {
			return j.fails(pinrule.RuleNoIPCLock, pinrule.RuleRootNoIPCLock) && !j.handOff() && j.c.memlock == nil
		},
		line: func(j *judging) int { return j.c.line },
		message: func(j *judging) string {
			return fmt.Sprintf("The training process (%s) holds no CAP_IPC_LOCK, so NCCL pins only what the node's memlock limit allows: this works where the runtime's limit is unlimited, and fails with its default (8 MiB).", j.who)
		},
		fix: nodeOrPodMemlock, carry: decided},
	{id: IDMemlockLimit, severity: Error,
		applies: func(j *judging) bool {
			return j.fails(pinrule.RuleNoIPCLock, pinrule.RuleRootNoIPCLock) && !j.handOff() && j.c.memlock != nil
		},
		line: func(j *judging) int { return j.c.memlockLine },
		message: func(j *judging) string {
			return j.kepNote(fmt.Sprintf("The memlock limit set by %s is %s and the training process holds no CAP_IPC_LOCK, so NCCL cannot register memory past it.", j.c.memlockFrom, fmtLimit(j.s.cred.Memlock)))
		},
		fix: nodeOrPodMemlock, carry: decided},
	// A memlock of 0 from the NRI annotation: nri-annotation says so.
	{id: IDMemlockLimit, severity: Error,
		applies: func(j *judging) bool { return j.fails(pinrule.RuleLimitZero) && !j.c.nriZero },
		line:    func(j *judging) int { return line2(j.c.memlockLine, j.c.line) },
		message: func(j *judging) string {
			return j.kepNote(fmt.Sprintf("The memlock limit is 0 (%s) and the training process holds no CAP_IPC_LOCK: ibv_reg_mr and mlock fail with EPERM.", j.c.memlockFrom))
		},
		fix: podMemlock, carry: decided},
	{id: IDUserNamespace, severity: Error,
		applies: func(j *judging) bool { return j.fails(pinrule.RuleUserNS) },
		line:    func(j *judging) int { return j.c.line },
		message: func(*judging) string {
			return "hostUsers: false puts the pod in a user namespace, where capabilities neither bypass nor raise the memlock limit, so NCCL cannot pin past it."
		},
		fix: func(j *judging) string { return j.manifest(advice.UserNamespace) }, carry: decided},
	// Enough for 1 GiB, but not unlimited, as NCCL recommends.
	{id: IDMemlockLimit, severity: Warning,
		applies: func(j *judging) bool { return j.warns(pinrule.RuleFinite) && j.c.memlock != nil },
		line:    func(j *judging) int { return j.c.memlockLine },
		message: func(j *judging) string {
			return j.kepNote(fmt.Sprintf("The memlock limit set by %s is %s: enough for 1 GiB but not unlimited, as NCCL recommends.", j.c.memlockFrom, fmtLimit(j.s.cred.Memlock)))
		},
		fix: podMemlock, carry: decided},
	{id: IDUserNamespace, severity: Warning,
		applies: func(j *judging) bool { return j.warns(pinrule.RuleUserNS) },
		line:    func(j *judging) int { return j.c.line },
		message: func(*judging) string {
			return "hostUsers: false puts the pod in a user namespace, where capabilities do not bypass the memlock limit; it is enough for 1 GiB but not unlimited."
		},
		fix: func(j *judging) string { return j.manifest(advice.UserNamespace) }, carry: decided},
	// securityContext.ulimits lifts the limit, behind a feature gate.
	{id: IDMemlockLimit, severity: Info,
		applies: func(j *judging) bool { return j.pins() && j.v.Rule == pinrule.RuleUnlimited && j.c.kep },
		line:    func(j *judging) int { return j.c.memlockLine },
		message: func(*judging) string { return "securityContext.ulimits lifts the memlock limit; " + kepGate + "." },
		fix:     podMemlock, carry: decided},
	// An init container or sidecar is not the training process: the
	// shared-memory transport runs in the main containers.
	{id: IDShmDefault, severity: Warning,
		applies: func(j *judging) bool { return j.c.gpu && !j.c.shm && !j.c.init },
		line:    func(j *judging) int { return j.c.line },
		message: func(j *judging) string {
			if j.p == advice.Docker {
				return "The service has GPUs but no shm_size (or ipc: host), so /dev/shm is Docker's 64 MiB, less than NCCL's SHM transport needs for several local GPUs."
			}
			return "The container has GPUs but no memory-backed volume at /dev/shm, so it gets the runtime's 64 MiB, less than NCCL's SHM transport needs for several local GPUs."
		},
		fix: func(j *judging) string { return j.manifest(advice.ShmSize) }},
	{id: IDPodSecurity, severity: Warning,
		applies: func(j *judging) bool { return j.k && len(psaRejected(j.c)) > 0 },
		line:    func(j *judging) int { return psaLine(j.c) },
		message: func(j *judging) string {
			return fmt.Sprintf("Pod Security Admission's baseline and restricted levels reject %s, so the pod is admitted only in a namespace at the privileged level.", strings.Join(psaRejected(j.c), ", "))
		},
		fix: func(j *judging) string {
			return j.manifest(advice.PodMemlock) + "\n" + j.manifest(advice.PrivilegedNamespace)
		}},

	// Found while the manifest is read.
	{id: IDMemlockLimit, severity: Error}, // a memlock value the apiserver or Compose refuses
	{id: IDNRIAnnotation, severity: Error},
	{id: IDPodCaps, severity: Error},
}

// readFinding is f, a finding made while reading the manifest, with the
// severity of its id's row for such findings.
func readFinding(f Finding) Finding {
	for _, r := range table {
		if r.id == f.ID && r.applies == nil {
			f.Severity = r.severity
			return f
		}
	}
	panic("lint: no table row for a finding read from the manifest: " + f.ID)
}

// psaRejected is what Pod Security's baseline and restricted levels
// reject in the container: capabilities added beyond baseline's list, and
// privileged.
func psaRejected(c container) []string {
	var out []string
	for _, a := range c.add {
		if n := normCap(a.name); !slices.Contains(baselineCaps, n) {
			out = append(out, "adding "+n)
		}
	}
	if c.privileged {
		out = append(out, "privileged: true")
	}
	return out
}

// psaLine is the line of the first thing psaRejected names.
func psaLine(c container) int {
	for _, a := range c.add {
		if !slices.Contains(baselineCaps, normCap(a.name)) {
			return a.line
		}
	}
	return c.line
}

// findings judges one container: every row of the table that applies.
func (c container) findings() ([]Finding, Container) {
	s := c.describe()
	j := &judging{c: c, s: s, v: s.verdict, p: c.platform, sp: c.spot(s), k: c.platform == advice.Kubernetes, who: s.uidText,
		addLine: capLine(c.add, "IPC_LOCK", capLine(c.add, "ALL", c.line))} // add: [ALL] adds it too
	out := []Finding{}
	for _, r := range table {
		if r.applies == nil || !r.applies(j) {
			continue
		}
		f := Finding{ID: r.id, Severity: r.severity, File: c.file, Line: r.line(j), Object: c.object, Container: c.name, Message: r.message(j), Fix: r.fix(j)}
		if r.carry != nil {
			f.Rule, f.Assumed = r.carry(j)
		}
		out = append(out, f)
	}
	out = append(out, c.extra...)
	c.silence.apply(out)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Line < out[j].Line })
	return out, Container{File: c.file, Object: c.object, Name: c.name, Line: c.line, Platform: c.platform, GPU: c.gpu, Cred: s.cred, Verdict: s.verdict, Assumed: s.assumed}
}
