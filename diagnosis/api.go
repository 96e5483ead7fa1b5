package diagnosis

// The types a Matcher reports with and is given: each Diagnosis found,
// the Place and first Failure of a log, and the Facts preflight saw.

import "github.com/ncclrun/ncclrun/internal/advice"

// Diagnosis is one cause found in the output, deduplicated across ranks
// (docs/contract.md "explain --json").
type Diagnosis struct {
	ID    string   `json:"id"`
	Title string   `json:"title"`
	Count int      `json:"count"` // processes (host+pid) that reported it
	Lines int      `json:"lines"` // matching lines
	Hosts []string `json:"hosts"`
	// CountCapped and HostsCapped say that Count and Hosts are lower
	// bounds: more distinct processes or hosts reported the cause than
	// the matcher keeps (4096 processes and 1024 hosts per cause, fewer
	// when many causes share the matcher's budget; docs/diagnosis.md).
	CountCapped bool   `json:"count_capped,omitempty"`
	HostsCapped bool   `json:"hosts_capped,omitempty"`
	FirstLine   string `json:"first_line"`
	Cause       string `json:"cause"`
	Fix         string `json:"fix"`
	// Certainty is "certain" or "likely" (with How telling how to be sure).
	Certainty string `json:"certainty,omitempty"`
	How       string `json:"how,omitempty"`
	// FirstFailure is where the cause was first seen, as far as that line
	// shows it (NCCL's host, a launcher's rank tag, a timestamp); nil when
	// it shows none of them.
	FirstFailure *Place `json:"first_failure,omitempty"`
	// KnockOnOf is the id of the diagnosis this one is a consequence of
	// (a lost peer, a watchdog timeout after another failure), or
	// KnockOnException when the first failure is a program's own
	// exception outside the catalog (Matcher.FirstFailure names it); ""
	// for a cause of its own.
	KnockOnOf string `json:"knock_on_of,omitempty"`
	// Peers are the addresses or hosts of the peers the lines say were
	// lost (peer-lost), as printed, at most maxPeers.
	Peers []string `json:"peers,omitempty"`
}

// KnockOnException is Diagnosis.KnockOnOf for a consequence of a
// program's own exception (Matcher.FirstFailure).
const KnockOnException = "exception"

// Place is where a line came from, as far as it shows: the host (NCCL's
// prefix, a Ray ip, a kubectl pod), the rank (torchrun's "[rankN]:",
// mpirun's "[job,N]<stdout>:", "[defaultN]:"), the time (NCCL's WARN
// timestamp or one at the start of the line). Empty fields are not shown.
type Place struct {
	Host string `json:"host,omitempty"`
	Rank *int   `json:"rank,omitempty"`
	Time string `json:"time,omitempty"`
}

// Failure is the first failure of a log, in the order ncclrun saw the
// lines: the diagnosis ranked first, or the exception a program raised
// before the lines of that diagnosis when the diagnosis is only a
// consequence (a lost peer, a timeout, the generic NCCL error).
type Failure struct {
	// ID is the diagnosis; "" for an exception outside the catalog.
	ID string `json:"id,omitempty"`
	Place
	// Line is the failure's first line (the exception's own line).
	Line string `json:"line"`
}

// Exception is the program's exception line when f is one (no catalog
// id); "" for a nil f or a catalog cause.
func (f *Failure) Exception() string {
	if f == nil || f.ID != "" {
		return ""
	}
	return f.Line
}

// Facts are what preflight saw, which decide what a log alone cannot.
// The zero value means "unknown" (explain on a saved log).
type Facts struct {
	Known bool
	// MemlockAdequate: CMD ran with unlimited (or >= need) memlock or
	// CAP_IPC_LOCK effective, so a verbs ENOMEM is not memlock.
	MemlockAdequate bool
	// Seen describes the state in words for the memlock message, e.g.
	// "RLIMIT_MEMLOCK 64 KiB (soft=hard), uid 1000, CAP_IPC_LOCK in the bounding set only".
	Seen string
	// Platform is where CMD runs (advice.Kubernetes, Docker, Slurm, Host);
	// "" when unknown.
	Platform advice.Platform
	// MemlockFix is the platform's fix from preflight, used instead of the
	// catalog's generic fix for memlock.
	MemlockFix string
	// ShmBytes is the size of /dev/shm (0 unknown).
	ShmBytes int64
	// NoRDMA: preflight saw no RDMA device on this host at all (sysfs
	// lists none), so NCCL's informational "NET/IB : No device found." is
	// expected (a workstation) and not reported. False means unknown or
	// devices present (a container that lacks /dev/infiniband still sees
	// the host's sysfs, so it keeps the diagnosis).
	NoRDMA bool
	// RDMAPorts are the RDMA ports preflight saw usable from CMD's view
	// (verbs node present, port ACTIVE), e.g. "mlx5_0:1"; empty means none
	// or unknown. Patterns with when "rdma-usable" count only with some.
	RDMAPorts []string
	// Host is this host's name (cmd/ncclrun passes os.Hostname): the
	// facts above are this host's. A line whose NCCL prefix names another
	// host is judged without them, as explain would judge it, and its
	// diagnosis names that host. "" means every line is taken as this
	// host's.
	Host string
	// GDRModule is the GPUDirect RDMA peer-memory module preflight found
	// on the host: GDRModuleNvMem (nv_peer_mem, or the MLNX_OFED
	// memory_peers entry every NCCL version detects), GDRModuleNvidiaPeermem
	// (the inbox nvidia-peermem only, which NCCL 2.19-2.22 do not
	// detect), GDRModuleNone, or "" (not checked: no GPU or no RDMA device).
	GDRModule string
	// IBDisabled: CMD runs with NCCL_IB_DISABLE=1 (its environment, run's
	// --no-ib or NCCL's configuration file): InfiniBand is not wanted, so
	// a libibverbs that cannot be loaded says nothing (patterns with
	// unless "ib-disabled"). It is the job's environment, so unlike the
	// facts above it holds for the lines of every host.
	IBDisabled bool
}

// Values of Facts.GDRModule.
const (
	GDRModuleNvMem         = "nv_mem"
	GDRModuleNvidiaPeermem = "nvidia_peermem"
	GDRModuleNone          = "none"
)
