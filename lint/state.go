package lint

import (
	"strconv"
	"strings"

	"github.com/ncclrun/ncclrun/internal/advice"
	"github.com/ncclrun/ncclrun/internal/pinrule"
	"github.com/ncclrun/ncclrun/internal/rlimit"
	"github.com/ncclrun/ncclrun/internal/units"
)

// defaultCaps is the capability set containerd's CRI plugin and Docker
// give a container that asks for nothing (containerd oci.defaultUnixCaps,
// moby caps.DefaultCapabilities): no IPC_LOCK.
var defaultCaps = []string{"CHOWN", "DAC_OVERRIDE", "FSETID", "FOWNER", "MKNOD", "NET_RAW", "SETGID", "SETUID",
	"SETFCAP", "SETPCAP", "NET_BIND_SERVICE", "SYS_CHROOT", "KILL", "AUDIT_WRITE"}

// allCaps are every capability name (include/uapi/linux/capability.h).
var allCaps = []string{"CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID", "SETPCAP",
	"LINUX_IMMUTABLE", "NET_BIND_SERVICE", "NET_BROADCAST", "NET_ADMIN", "NET_RAW", "IPC_LOCK", "IPC_OWNER", "SYS_MODULE",
	"SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT", "SYS_ADMIN", "SYS_BOOT", "SYS_NICE", "SYS_RESOURCE", "SYS_TIME",
	"SYS_TTY_CONFIG", "MKNOD", "LEASE", "AUDIT_WRITE", "AUDIT_CONTROL", "SETFCAP", "MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG",
	"WAKE_ALARM", "BLOCK_SUSPEND", "AUDIT_READ", "PERFMON", "BPF", "CHECKPOINT_RESTORE"}

// baselineCaps are the capabilities Pod Security's baseline level allows
// adding; restricted allows NET_BIND_SERVICE only.
var baselineCaps = []string{"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
	"NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}

// nodeMemlock is the limit lint assumes a container gets when the manifest
// sets none: what containerd and dockerd pass on when their unit has no
// LimitMEMLOCK, on kernels >= 5.16 (docs/containers.md).
var nodeMemlock = pinrule.Limit{Soft: 8 << 20, Hard: 8 << 20}

// normCap turns "cap_ipc_lock", "CAP_IPC_LOCK", "ipc_lock" into
// "IPC_LOCK" (Kubernetes and Compose names are case-insensitive here, with
// or without CAP_).
func normCap(s string) string {
	return strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(s)), "CAP_")
}

// capItem is one capability name in the manifest with its line.
type capItem struct {
	name string
	line int
}

// container is what a manifest says about one container.
type container struct {
	platform        advice.Platform
	file, object    string
	name            string
	line            int
	uid, gid        *int64
	nonRoot         bool // runAsNonRoot, or a Compose user name that is not root
	userName        string
	userLine        int
	add, drop       []capItem
	privileged      bool
	nnp             bool
	nnpLine         int
	userns          bool
	launch          launch
	commandLine     int
	env             map[string]string
	gpu             bool
	shm             bool // /dev/shm is not the runtime's default
	memlock         *pinrule.Limit
	memlockLine     int
	memlockFrom     string
	annotationsLine int
	// init: an initContainer (a restartable sidecar or one that runs to
	// completion before the others start).
	init bool
	// kep: the limit comes from securityContext.ulimits (KEP-5758);
	// kepRejected: the field holds a memlock the validation rejects.
	kep, kepRejected bool
	// noStart: the ulimit-adjuster rejects the pod's annotation, so the
	// runtime does not create the container, or the apiserver rejects its
	// securityContext.ulimits; nriZero: the annotation
	// gives memlock 0 (its finding says so).
	noStart, nriZero bool
	// extra are findings made while reading the manifest.
	extra []Finding
	// silence is what the object's (and its pod template's) annotations
	// silence.
	silence silences
}

// bounding computes the container's capability set from add and drop in
// the runtime's order: containerd's CRI (ALL in add, ALL in drop, then each
// add, then each drop: a name in both is dropped) or Docker's (drop ALL
// means "only what is added"; otherwise drop then add: a name in both is
// added).
func (c container) bounding() map[string]bool {
	set := map[string]bool{}
	all := func() {
		for _, n := range allCaps {
			set[n] = true
		}
	}
	has := func(list []capItem, n string) bool {
		for _, x := range list {
			if normCap(x.name) == n {
				return true
			}
		}
		return false
	}
	if c.privileged {
		all()
		return set
	}
	for _, n := range defaultCaps {
		set[n] = true
	}
	if c.platform == advice.Docker {
		switch {
		case has(c.add, "ALL"):
			all()
			for _, d := range c.drop {
				delete(set, normCap(d.name))
			}
		case has(c.drop, "ALL"):
			set = map[string]bool{}
			for _, a := range c.add {
				set[normCap(a.name)] = true
			}
		default:
			for _, d := range c.drop {
				delete(set, normCap(d.name))
			}
			for _, a := range c.add {
				set[normCap(a.name)] = true
			}
		}
		return set
	}
	if has(c.add, "ALL") {
		all()
	}
	if has(c.drop, "ALL") {
		set = map[string]bool{}
	}
	for _, a := range c.add {
		if n := normCap(a.name); n != "ALL" {
			set[n] = true
		}
	}
	for _, d := range c.drop {
		delete(set, normCap(d.name))
	}
	return set
}

// state is a container turned into the rule table's description.
type state struct {
	cred    pinrule.Cred
	verdict pinrule.Verdict
	assumed []string
	root    bool // the container's own user is root
	uidText string
	// memlockRefused: ncclrun --memlock raises the hard limit without
	// CAP_SYS_RESOURCE, so ncclrun refuses to start the command.
	memlockRefused *memlockRefusal
	// memlockUsage: ncclrun --memlock SOFT:HARD with soft above hard,
	// which ncclrun refuses as a usage error before anything starts.
	memlockUsage bool
}

type memlockRefusal struct{ from, to pinrule.Limit }

// describe derives ncclrun's credentials (or, without ncclrun, the first
// process's) from the manifest with the runtime's and the kernel's exec
// rules (docs/research/capabilities.md §1, §2; docs/containers.md).
func (c container) describe() state {
	var s state
	cr := pinrule.Cred{Platform: c.platform, CredsKnown: true, MemlockKnown: true, Judge: true}
	// The user.
	switch {
	case c.uid != nil:
		cr.UID = int(*c.uid)
		s.uidText = "uid " + strconv.FormatInt(*c.uid, 10)
	case c.nonRoot:
		cr.UIDUnknown = true
		s.uidText = "the image's non-root user"
		if c.userName != "" {
			s.uidText = "user " + strconv.Quote(c.userName)
		}
		s.assumed = append(s.assumed, "the container's uid is not root but unknown ("+c.why()+"); `id` in the container shows it")
	default:
		s.uidText = "root"
		s.assumed = append(s.assumed, "the image's USER is root (the manifest sets no user); `id` in the container shows it")
	}
	if c.gid != nil {
		cr.GID = int(*c.gid)
	} else if !cr.UIDUnknown {
		cr.GID = cr.UID
	}
	s.root = !cr.UIDUnknown && cr.UID == 0
	bnd := c.bounding()
	ipcBnd := bnd["IPC_LOCK"]
	cr.FullBounding = c.privileged
	cr.NoNewPrivs = c.nnp
	cr.UserNS = c.userns
	cr.RDMA = pinrule.Yes
	s.assumed = append(s.assumed, "the node has an RDMA device, where NCCL registers memory and memlock matters")

	// What the runtime's first exec holds: the CRI spec gives every user
	// the set in effective and permitted; Docker gives a non-root user
	// the bounding set only (moby oci.SetCapabilities since 20.10.14).
	specPermitted := ipcBnd && (s.root || c.platform != advice.Docker)
	l := c.launch
	if l.ncclrun {
		cr.FileCap = pinrule.Unknown
		switch {
		case s.root:
			// Root after every exec: P' = bounding.
			cr.IPCLock = pinrule.CapSets{Effective: ipcBnd, Permitted: ipcBnd, Bounding: ipcBnd}
			cr.Setid = bnd["SETUID"] && bnd["SETGID"]
		default:
			cr.FileCap = pinrule.Yes
			if ipcBnd {
				s.assumed = append(s.assumed, "the image's ncclrun carries the file capability cap_ipc_lock+p (Dockerfile.base); `getcap $(command -v ncclrun)` shows it")
			}
			// A +p file: P' = F(p) & bounding; under no_new_privs only
			// what the exec'ing process held in its permitted set.
			held := specPermitted
			if !l.direct {
				held = false // a shell or another program ran first and kept nothing
			}
			prm := ipcBnd && (!c.nnp || held)
			cr.IPCLock = pinrule.CapSets{Permitted: prm, Bounding: ipcBnd}
		}
		cr.Shell = pinrule.TriOf(!l.direct)
		if !l.known {
			s.assumed = append(s.assumed, "the image's ENTRYPOINT does not wrap ncclrun in a shell")
		}
	} else {
		cr.FileCap = pinrule.No
		if s.root {
			cr.IPCLock = pinrule.CapSets{Effective: ipcBnd, Permitted: ipcBnd, Bounding: ipcBnd}
		} else {
			cr.IPCLock = pinrule.CapSets{Bounding: ipcBnd}
		}
		if !l.known {
			s.assumed = append(s.assumed, "the image's ENTRYPOINT is not ncclrun (`docker inspect` shows it)")
		}
	}
	// The plan of ncclrun's flags.
	if l.ncclrun && l.userSet {
		cr.Plan.User = true
		u, g, ok := parseIDs(l.user)
		if ok {
			cr.Plan.UID, cr.Plan.GID = u, g
		} else {
			// A name, or $(VAR): some user other than root.
			cr.Plan.UID, cr.Plan.GID = -1, -1
		}
	}
	for _, d := range strings.Split(l.dropCaps, ",") {
		if n := normCap(d); n == "IPC_LOCK" || n == "ALL" {
			cr.Plan.DropIPCLock = true
		}
	}
	// The limit.
	switch {
	case c.memlock != nil:
		cr.Memlock = *c.memlock
		if c.kep {
			s.assumed = append(s.assumed, "the cluster enables the ContainerUlimits feature gate (KEP-5758, alpha in Kubernetes 1.38 at the earliest) and the runtime supports it; without it the node's limit applies")
		}
	default:
		cr.Memlock = nodeMemlock
		s.assumed = append(s.assumed, "the node's runtime passes on a finite memlock limit (8 MiB; containerd and dockerd without LimitMEMLOCK); `ulimit -l` in the container, or `ncclrun doctor`, shows it")
	}
	if l.ncclrun && rlimit.Above(cr.Memlock.Hard, cr.Memlock.Soft) {
		cr.Memlock.Soft = cr.Memlock.Hard // ncclrun raises soft to hard
	}
	if l.ncclrun && l.memlock != "" {
		if lim, ok := parseLimit(l.memlock); ok && rlimit.Above(lim.Soft, lim.Hard) {
			s.memlockUsage = true
		} else if ok {
			// A hard limit above the container's needs CAP_SYS_RESOURCE in
			// the initial user namespace: root's, from the bounding set.
			if rlimit.Above(lim.Hard, cr.Memlock.Hard) && !(s.root && bnd["SYS_RESOURCE"] && !c.userns) {
				s.memlockRefused = &memlockRefusal{from: cr.Memlock, to: lim}
			}
			cr.Memlock, cr.Plan.Memlock = lim, true
		}
	}
	s.cred = cr
	s.verdict = pinrule.Decide(cr, minMemlock)
	return s
}

// minMemlock is doctor's default --min-memlock.
const minMemlock = 1 << 30

func (c container) why() string {
	if c.platform == advice.Docker {
		if strings.Contains(c.userName, "$") {
			return "user: " + c.userName + ", which Compose takes from the environment"
		}
		return "user: " + c.userName
	}
	return "runAsNonRoot: true without runAsUser"
}

// parseIDs reads "UID[:GID]" with numbers.
func parseIDs(s string) (uid, gid int, ok bool) {
	us, gs, hasG := strings.Cut(s, ":")
	u, err := strconv.Atoi(us)
	if err != nil || u < 0 {
		return 0, 0, false
	}
	g := u
	if hasG {
		if g, err = strconv.Atoi(gs); err != nil || g < 0 {
			return 0, 0, false
		}
	}
	return u, g, true
}

// parseLimit reads a size or SOFT:HARD as ncclrun --memlock does.
func parseLimit(s string) (pinrule.Limit, bool) {
	soft, hard, two := strings.Cut(s, ":")
	sv, err := units.ParseSize(soft)
	if err != nil {
		return pinrule.Limit{}, false
	}
	hv := sv
	if two {
		if hv, err = units.ParseSize(hard); err != nil {
			return pinrule.Limit{}, false
		}
	}
	return pinrule.Limit{Soft: sv, Hard: hv}, true
}
