package lint

import (
	"fmt"
	"sort"
	"strings"

	"github.com/ncclrun/ncclrun/internal/advice"
	"github.com/ncclrun/ncclrun/internal/pinrule"
	"github.com/ncclrun/ncclrun/internal/units"
)

// Severities of a finding.
const (
	Error   = "error"
	Warning = "warning"
	Info    = "info"
)

// Finding ids (docs/contract.md "lint"; docs/lint.md).
const (
	IDIPCLockInert   = "ipc-lock-inert"
	IDNNPShell       = "nnp-shell"
	IDNoIPCLock      = "no-ipc-lock"
	IDUserNeedsSetid = "user-needs-setuid"
	IDShmDefault     = "shm-default"
	IDPodSecurity    = "pod-security"
	IDMemlockLimit   = "memlock-limit"
	IDUserNamespace  = "user-namespace"
	IDNodeMemlock    = "node-memlock"
	IDNRIAnnotation  = "nri-annotation"
	IDPodCaps        = "pod-capabilities"
)

// Rules lists every finding id with its severity and meaning, in the order
// docs/lint.md gives them (SARIF's rules too).
var Rules = []struct{ ID, Severity, Meaning string }{
	{IDIPCLockInert, Error, "a non-root container adds IPC_LOCK, but nothing makes it effective for the training process (Kubernetes and Docker put it in the bounding set only), so NCCL cannot pin past the runtime's memlock limit"},
	{IDNNPShell, Error, "the file-capability ncclrun is started through a shell or other program while allowPrivilegeEscalation: false (no_new_privs): the file capability is ignored"},
	{IDNoIPCLock, Error, "ncclrun is started for the capability hand-off (--user from root) but IPC_LOCK is not in the container's bounding set (not added, or dropped)"},
	{IDUserNeedsSetid, Error, "ncclrun --user in a container that cannot switch users (SETUID/SETGID dropped, or not root)"},
	{IDMemlockLimit, Error, "the manifest sets a memlock limit (Compose ulimits, the NRI annotation, securityContext.ulimits) below what NCCL needs, and nothing bypasses it (warning: enough, but not unlimited; info: securityContext.ulimits lifts it, behind the ContainerUlimits feature gate); or securityContext.ulimits holds a memlock its validation rejects"},
	{IDNRIAnnotation, Error, "the NRI ulimit-adjuster annotation, decoded as the plugin decodes it, fails container creation (a negative or non-integer value, a missing or unknown type, hard below soft), sets memlock 0 or a missing value, or names no container of the pod"},
	{IDPodCaps, Error, "securityContext.capabilities on the pod, where Kubernetes has no such field: kubectl refuses the manifest (strict field validation) and clients that do not validate drop the field, so no container gets the capability"},
	{IDUserNamespace, Error, "hostUsers: false: in a user namespace capabilities neither bypass nor raise the memlock limit"},
	{IDShmDefault, Warning, "a GPU container without a memory-backed volume at /dev/shm (and no hostIPC): the runtime's 64 MiB default"},
	{IDPodSecurity, Warning, "an added capability (IPC_LOCK) that Pod Security Admission's baseline and restricted levels reject"},
	{IDNodeMemlock, Info, "the training process holds no CAP_IPC_LOCK, so it pins only what the node's memlock limit allows: fine where the runtime's limit is unlimited (way c), else NCCL fails"},
}

// Finding is one problem in one container (docs/contract.md "lint").
type Finding struct {
	ID        string `json:"id"`
	Severity  string `json:"severity"`
	File      string `json:"file"`
	Line      int    `json:"line"`
	Object    string `json:"object"`
	Container string `json:"container"`
	Message   string `json:"message"`
	Fix       string `json:"fix"`
	// Rule is the row of the decision table (doctor's memlock
	// details.rule for the same state), for the memlock findings.
	Rule string `json:"rule,omitempty"`
	// Assumed lists what the manifest could not tell.
	Assumed []string `json:"assumed,omitempty"`
}

// Container is one container checked, with its decision.
type Container struct {
	File, Object, Name string
	Line               int
	Platform           advice.Platform
	GPU                bool
	Cred               pinrule.Cred
	Verdict            pinrule.Verdict
	Assumed            []string
}

func (c container) spot(s state) advice.Spot {
	w := advice.Who{Unknown: true}
	switch {
	case c.uid != nil && *c.uid != 0:
		w = advice.Who{UID: int(*c.uid), GID: int(*c.uid)}
		if c.gid != nil {
			w.GID = int(*c.gid)
		}
	case s.cred.Plan.User && s.cred.Plan.UID >= 0:
		w = advice.Who{UID: s.cred.Plan.UID, GID: s.cred.Plan.GID}
	case c.uid != nil && *c.uid == 0 && !s.cred.Plan.User:
		w = advice.Who{UID: 1000, GID: 1000} // an example training user
	}
	return advice.Spot{Container: c.name, Command: c.launch.command(), Who: w}
}

// capLine is the line of an added or dropped capability, else def.
func capLine(list []capItem, name string, def int) int {
	for _, x := range list {
		if normCap(x.name) == name {
			return x.line
		}
	}
	return def
}

// findings judges one container.
func (c container) findings() ([]Finding, Container) {
	s := c.describe()
	v := s.verdict
	out := []Finding{}
	add := func(id string, ln int, msg, fix string, memlock bool) {
		sev := Error
		for _, r := range Rules {
			if r.ID == id {
				sev = r.Severity
			}
		}
		f := Finding{ID: id, Severity: sev, File: c.file, Line: ln, Object: c.object, Container: c.name, Message: msg, Fix: fix}
		if memlock {
			f.Rule, f.Assumed = v.Rule, s.assumed
		}
		out = append(out, f)
	}
	p, sp := c.platform, c.spot(s)
	k := p == advice.Kubernetes
	who := s.uidText
	addLine := capLine(c.add, "IPC_LOCK", capLine(c.add, "ALL", c.line)) // add: [ALL] adds it too

	if v.Command.LacksSetid && c.launch.userSet {
		need := "CAP_SETUID and CAP_SETGID"
		if !s.root {
			need += ", which only a root container holds"
		}
		add(IDUserNeedsSetid, c.commandLine, fmt.Sprintf("ncclrun --user=%s must switch users but the container lacks %s, so ncclrun exits 125 before the command starts.", c.launch.user, need),
			advice.Manifest(advice.AddSetid, p, sp), v.Rule == pinrule.RuleNoSetid)
	}
	if r := s.memlockRefused; r != nil {
		from := "the node's, assumed"
		if c.memlock != nil {
			from = "set by " + c.memlockFrom + ","
		}
		add(IDMemlockLimit, c.commandLine, fmt.Sprintf("ncclrun --memlock=%s raises the hard memlock limit above the container's (%s %s), which needs CAP_SYS_RESOURCE that ncclrun does not hold here, so ncclrun exits 125 before the command starts.",
			c.launch.memlock, from, fmtLimit(r.from)), advice.Manifest(advice.PodMemlock, p, sp), true)
		out[len(out)-1].Rule = "" // the row is that of a limit ncclrun does not get to set
	}
	memlock := c.gpu && !c.noStart && s.memlockRefused == nil
	if memlock && v.Status == pinrule.Fail {
		switch v.Rule {
		case pinrule.RuleK8sTrap:
			msg := fmt.Sprintf("IPC_LOCK is added for %s, but the runtime's exec of a non-root process keeps it in the bounding set only (the CRI spec also puts it in effective and permitted; the exec drops those) and nothing hands it to the training process, so NCCL cannot pin past the memlock limit (ibv_reg_mr fails with Cannot allocate memory).", who)
			if p == advice.Docker {
				msg = fmt.Sprintf("IPC_LOCK is added for %s, but Docker gives a non-root user's added capabilities to the bounding set only and nothing hands it to the training process, so NCCL cannot pin past the memlock limit (ibv_reg_mr fails with Cannot allocate memory).", who)
			}
			if c.launch.ncclrun && p == advice.Docker {
				msg = fmt.Sprintf("IPC_LOCK is added for %s, but Docker keeps it in the bounding set only and ncclrun's file capability cannot take it from there, so NCCL cannot pin past the memlock limit.", who)
			}
			fix := advice.Manifest(advice.Ambient, p, sp)
			if k {
				fix += "\n" + advice.Manifest(advice.PodMemlock, p, sp)
			}
			add(IDIPCLockInert, addLine, msg, fix, true)
			if c.entrypointDecides() {
				// No command: the image's ENTRYPOINT runs first, and an
				// exec-form ncclrun there (Dockerfile.base) would hand the
				// capability over. The manifest cannot tell: a warning.
				f := &out[len(out)-1]
				f.Severity = Warning
				f.Message = strings.TrimSuffix(f.Message, ".") + ", unless the image's ENTRYPOINT is ncclrun in exec form (Dockerfile.base; `docker inspect --format '{{.Config.Entrypoint}}' IMAGE` shows it)."
			}
		case pinrule.RuleNNPFileCap:
			if k {
				add(IDNNPShell, c.commandLine, fmt.Sprintf("ncclrun is started through %s while allowPrivilegeEscalation: false sets no_new_privs, so the kernel ignores its cap_ipc_lock+p file capability and NCCL cannot pin past the memlock limit.", c.launch.via),
					advice.Manifest(advice.ExecForm, p, sp), true)
			} else {
				add(IDIPCLockInert, line2(c.nnpLine, addLine), fmt.Sprintf("IPC_LOCK is added for %s under no-new-privileges: Docker keeps it in the bounding set only, so no_new_privs makes the kernel ignore ncclrun's file capability even in exec form.", who),
					advice.Manifest(advice.ExecForm, p, sp), true)
			}
		case pinrule.RuleDropped:
			add(IDNoIPCLock, c.commandLine, "ncclrun --drop-cap removes CAP_IPC_LOCK from the command, so NCCL cannot pin past the memlock limit.", advice.Manifest(advice.PodMemlock, p, sp), true)
		case pinrule.RuleNoIPCLock, pinrule.RuleRootNoIPCLock:
			dropped := capLine(c.drop, "IPC_LOCK", 0)
			if c.launch.ncclrun && (s.cred.Plan.User || dropped > 0) {
				ln := c.commandLine
				if dropped > 0 {
					ln = dropped
				}
				add(IDNoIPCLock, ln, fmt.Sprintf("ncclrun is started to hand CAP_IPC_LOCK to the training process, but IPC_LOCK is not in the container's capabilities (%s), so there is nothing to hand over.", dropWords(c)),
					advice.Manifest(advice.AddIPCLock, p, sp), true)
				break
			}
			msg := fmt.Sprintf("The training process (%s) holds no CAP_IPC_LOCK, so NCCL pins only what the node's memlock limit allows: this works where the runtime's limit is unlimited, and fails with its default (8 MiB).", who)
			fix := advice.Manifest(advice.PodMemlock, p, sp)
			if k {
				fix = advice.Manifest(advice.RaiseMemlock, p, sp) + "\n" + fix
			}
			if c.memlock == nil {
				add(IDNodeMemlock, c.line, msg, fix, true)
			} else {
				add(IDMemlockLimit, c.memlockLine, fmt.Sprintf("The memlock limit set by %s is %s and the training process holds no CAP_IPC_LOCK, so NCCL cannot register memory past it.", c.memlockFrom, fmtLimit(s.cred.Memlock)), fix, true)
			}
		case pinrule.RuleLimitZero:
			if c.nriZero {
				break // the nri-annotation finding says so
			}
			add(IDMemlockLimit, line2(c.memlockLine, c.line), fmt.Sprintf("The memlock limit is 0 (%s) and the training process holds no CAP_IPC_LOCK: ibv_reg_mr and mlock fail with EPERM.", c.memlockFrom), advice.Manifest(advice.PodMemlock, p, sp), true)
		case pinrule.RuleUserNS:
			add(IDUserNamespace, c.line, "hostUsers: false puts the pod in a user namespace, where capabilities neither bypass nor raise the memlock limit, so NCCL cannot pin past it.", advice.Manifest(advice.UserNamespace, p, sp), true)
		}
	}
	if memlock && v.Status == pinrule.Warn {
		switch v.Rule {
		case pinrule.RuleFinite:
			if c.memlock != nil {
				add(IDMemlockLimit, c.memlockLine, fmt.Sprintf("The memlock limit set by %s is %s: enough for 1 GiB but not unlimited, as NCCL recommends.", c.memlockFrom, fmtLimit(s.cred.Memlock)), advice.Manifest(advice.PodMemlock, p, sp), true)
				out[len(out)-1].Severity = Warning
			}
		case pinrule.RuleUserNS:
			add(IDUserNamespace, c.line, "hostUsers: false puts the pod in a user namespace, where capabilities do not bypass the memlock limit; it is enough for 1 GiB but not unlimited.", advice.Manifest(advice.UserNamespace, p, sp), true)
			out[len(out)-1].Severity = Warning
		}
	}
	if memlock && v.Rule == pinrule.RuleUnlimited && c.kep {
		add(IDMemlockLimit, c.memlockLine, "securityContext.ulimits lifts the memlock limit; "+kepGate+".", advice.Manifest(advice.PodMemlock, p, sp), true)
		out[len(out)-1].Severity = Info
	}
	if c.kep {
		for i := range out {
			if out[i].ID == IDMemlockLimit && out[i].Line == c.memlockLine && !strings.Contains(out[i].Message, kepGate) {
				out[i].Message += " Note: " + kepGate + "."
			}
		}
	}
	// An init container or sidecar is not the training process: the
	// shared-memory transport runs in the main containers.
	if c.gpu && !c.shm && !c.init {
		msg := "The container has GPUs but no memory-backed volume at /dev/shm, so it gets the runtime's 64 MiB, less than NCCL's SHM transport needs for several local GPUs."
		if p == advice.Docker {
			msg = "The service has GPUs but no shm_size (or ipc: host), so /dev/shm is Docker's 64 MiB, less than NCCL's SHM transport needs for several local GPUs."
		}
		add(IDShmDefault, c.line, msg, advice.Manifest(advice.ShmSize, p, sp), false)
	}
	if k {
		var rejected []string
		ln := 0
		for _, a := range c.add {
			if n := normCap(a.name); !baselineCaps[n] {
				rejected = append(rejected, "adding "+n)
				if ln == 0 {
					ln = a.line
				}
			}
		}
		if c.privileged {
			rejected = append(rejected, "privileged: true")
			if ln == 0 {
				ln = c.line
			}
		}
		if len(rejected) > 0 {
			add(IDPodSecurity, ln, fmt.Sprintf("Pod Security Admission's baseline and restricted levels reject %s, so the pod is admitted only in a namespace at the privileged level.", strings.Join(rejected, ", ")),
				advice.Manifest(advice.PodMemlock, p, sp)+"\n"+advice.Manifest(advice.PrivilegedNamespace, p, sp), false)
		}
	}
	out = append(out, c.extra...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Line < out[j].Line })
	return out, Container{File: c.file, Object: c.object, Name: c.name, Line: c.line, Platform: p, GPU: c.gpu, Cred: s.cred, Verdict: v, Assumed: s.assumed}
}

// entrypointDecides: the manifest leaves the entrypoint to the image, and
// an exec-form ncclrun there would make the verdict ok.
func (c container) entrypointDecides() bool {
	if c.launch.known || c.launch.ncclrun {
		return false
	}
	alt := c
	alt.launch = parseLaunch(append([]string{"/usr/local/bin/ncclrun", "--"}, c.launch.argv...), true)
	return alt.describe().verdict.Status == pinrule.OK
}

func line2(a, b int) int {
	if a > 0 {
		return a
	}
	return b
}

func dropWords(c container) string {
	switch {
	case capLine(c.drop, "IPC_LOCK", 0) > 0:
		return "dropped"
	case capLine(c.drop, "ALL", 0) > 0:
		return "drop: [ALL] and not added"
	}
	return "not added; the runtime's default set has none"
}

func fmtLimit(l pinrule.Limit) string {
	if l.Soft == l.Hard {
		return units.FormatSize(l.Soft)
	}
	return fmt.Sprintf("%s (hard %s)", units.FormatSize(l.Soft), units.FormatSize(l.Hard))
}
