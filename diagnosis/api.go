package diagnosis

// This file is the contract between diagnosis and cmd/ncclrun. Extend it
// (new fields, new functions); do not rename or remove what is here.

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
	// GDRModule is the GPUDirect RDMA peer-memory module preflight found
	// on the host: GDRModuleNvMem (nv_peer_mem, or the MLNX_OFED
	// memory_peers entry every NCCL version detects), GDRModuleNvidiaPeermem
	// (the inbox nvidia-peermem only, which NCCL 2.19-2.22 do not
	// detect), GDRModuleNone, or "" (not checked: no GPU or no RDMA device).
	GDRModule string
}

// Values of Facts.GDRModule.
const (
	GDRModuleNvMem         = "nv_mem"
	GDRModuleNvidiaPeermem = "nvidia_peermem"
	GDRModuleNone          = "none"
)
