package preflight

// The types cmd/ncclrun gives Run and gets back from it: the options, the
// credential plan, the report with its checks and facts, and the platform.

import (
	"encoding/json"

	"github.com/ncclrun/ncclrun/internal/advice"
	"github.com/ncclrun/ncclrun/internal/pinrule"
	"github.com/ncclrun/ncclrun/internal/rlimit"
	"github.com/ncclrun/ncclrun/internal/units"
)

// Status is the verdict of one check: the same type as the credential
// decision's (internal/pinrule), so a verdict is declared once.
type Status = pinrule.Status

// The verdicts of a check, from best to worst.
const (
	OK   = pinrule.OK
	Warn = pinrule.Warn
	Fail = pinrule.Fail
	Skip = pinrule.Skip
)

// Check ids of docs/contract.md.
const (
	IDMemlock      = "memlock"
	IDCapabilities = "capabilities"
	IDRDMA         = "rdma"
	IDShm          = "shm"
	IDGPU          = "gpu"
	IDGPUDirect    = "gpudirect"
	IDNetwork      = "network"
	IDEnvironment  = "environment"
	// IDEnvSanity warns about settings that break NCCL in ways the other
	// checks do not see (sanity.go).
	IDEnvSanity = "env-sanity"
)

// Result is one check's outcome, serialised as docs/contract.md's check object.
type Result struct {
	ID      string         `json:"id"`
	Status  Status         `json:"status"`
	Summary string         `json:"summary"`
	Fix     string         `json:"fix,omitempty"`
	Details map[string]any `json:"details,omitempty"`
}

// Platform is where ncclrun runs, as the environment check decides it
// (Environment.Kind); its values are the constants below, and it is
// internal/advice's Platform, which keys the fix texts.
type Platform = advice.Platform

// The platforms, as doctor's JSON names them.
const (
	Kubernetes Platform = advice.Kubernetes
	Docker     Platform = advice.Docker
	Slurm      Platform = advice.Slurm
	Host       Platform = advice.Host
)

// Environment says which platform ncclrun runs on and why it thinks so.
type Environment struct {
	Kind   Platform `json:"kind"`
	Reason string   `json:"reason"`
	Clues  []string `json:"clues,omitempty"`
}

// Report is the whole of doctor's answer (docs/contract.md "doctor --json").
type Report struct {
	Environment Environment `json:"environment"`
	Checks      []Result    `json:"checks"`
	// Command is the state CMD will start in; it is also carried in
	// capabilities.details.command. Not serialised at the top level.
	Command CommandState `json:"-"`
	// NCCLConf are the variables NCCL's configuration files set (ncclConfig,
	// read once by Run): the launcher adds none of them. Not serialised at
	// the top level (environment.details.nccl_conf carries them).
	NCCLConf map[string]string `json:"-"`
	// Facts are what the checks found, typed, for the packages that act on
	// them; the checks' Details are only their JSON rendering.
	Facts Facts `json:"-"`
	// Warnings say, one line per file, what a tree root (not the live
	// system) held that was not read: a FIFO, a device, a link out of the
	// tree, a file over the size bound. Not serialised.
	Warnings []string `json:"-"`
}

// Failed reports whether any check failed.
func (r Report) Failed() bool { return r.Any(Fail) }

// Any reports whether any check has status st.
func (r Report) Any(st Status) bool {
	for _, c := range r.Checks {
		if c.Status == st {
			return true
		}
	}
	return false
}

// Check returns the result with the given id, and false when there is none.
func (r Report) Check(id string) (Result, bool) {
	for _, c := range r.Checks {
		if c.ID == id {
			return c, true
		}
	}
	return Result{}, false
}

// Rlimit is a soft/hard pair in bytes; Unlimited (-1) means RLIM_INFINITY.
// It is internal/rlimit's one limit type, which pinrule, the launcher and
// the CLI pass too.
type Rlimit = rlimit.Limit

// Unlimited is the value of an unlimited rlimit in Rlimit and in JSON.
const Unlimited = units.Unlimited

// Plan is what the launcher will do to CMD's credentials; preflight uses it
// to report the state CMD will run in, not only ncclrun's own.
// The zero Plan means: same user, no capability dropped, limits unchanged.
type Plan struct {
	// User is the --user value ("" = keep ncclrun's uid). Resolved under Root.
	User string
	// Resolved says that UID and GID are User already resolved by the
	// caller (on the live system, the ids the launcher will use); when
	// false, User is resolved with the passwd and group files under Root.
	Resolved bool
	UID, GID int
	// DropCaps are capability names (e.g. "CAP_IPC_LOCK" or "IPC_LOCK") that
	// --drop-cap removes from CMD.
	DropCaps []string
	// Memlock, when non-nil, is the --memlock value forced on CMD.
	Memlock *Rlimit
	// Exec is CMD's executable as the launcher will find it ("" when there
	// is no CMD, as for doctor). On the live system its file capability
	// (or its #! interpreter's) is read: exec'ing a file that carries one
	// clears the ambient set that hands CMD CAP_IPC_LOCK.
	Exec string
}

// Options configure Run. The zero value checks the live system with the
// documented defaults.
type Options struct {
	// Root is the directory every fact is read under; "" or "/" is the
	// live system, where probes that need system calls also run.
	Root string
	// Env is the environment CMD will get (KEY=VALUE), used for
	// NCCL_SOCKET_IFNAME, NCCL_IB_HCA, NCCL_CONF_FILE, SLURM_*, KUBERNETES_*.
	// nil means os.Environ().
	Env []string
	// MinMemlock is the locked memory CMD must be able to pin; 0 means
	// DefaultMinMemlock.
	MinMemlock int64
	// Probe, when > 0, pins that many bytes with mlock(2) in a child with
	// CMD's credentials (live system only).
	Probe int64
	// Prober pins size bytes with mlock(2) (never mlockall: it counts the
	// whole address space) in a child started with exactly CMD's
	// credentials and limits, and returns why it could not. It is called
	// once when Probe > 0 on the live system; nil means no probe runs (the
	// memlock details say it was skipped). cmd/ncclrun implements it.
	Prober func(size int64) error
	// MemlockBefore is the limit as found before the launcher raised it
	// (nil: nothing was raised, before == after).
	MemlockBefore *Rlimit
	// Plan is what the launcher will do to CMD.
	Plan Plan
	// VersionOnDemand, on the live system, has the env-sanity check read
	// NCCL's version (a listing of the library directories) only where a
	// rule's verdict depends on it; its details then carry nccl_version
	// only when it was read. For a caller that shows the details only of
	// a check that warned.
	VersionOnDemand bool
	// Ranks is how many ranks CMD starts, as its own arguments say
	// (torchrun's --nproc-per-node, mpirun's -np), and RanksFrom the
	// argument that says so ("--nproc-per-node=8"); 0 means CMD's
	// arguments do not say (doctor has no CMD). cmd/ncclrun reads them.
	Ranks     int
	RanksFrom string
}

// DefaultMinMemlock is the default of --min-memlock; docs/preflight.md says why.
const DefaultMinMemlock int64 = 1 << 30

// CommandState is what CMD will run with (capabilities.details.command).
type CommandState struct {
	UID              int  `json:"uid"`
	GID              int  `json:"gid"`
	IPCLockEffective bool `json:"ipc_lock_effective"`
	// Via is "inherited", "ambient", "file" or "none".
	Via string `json:"via"`
	// Ambient tells the launcher to raise CAP_IPC_LOCK into CMD's ambient set.
	Ambient bool `json:"-"`
	// Memlock is the limit CMD will start with, when MemlockKnown; JSON
	// null when it could not be read (never a 0/0 that reads as a limit).
	Memlock      Rlimit `json:"memlock"`
	MemlockKnown bool   `json:"-"`
}

// MarshalJSON writes Memlock as null when it is not known.
func (c CommandState) MarshalJSON() ([]byte, error) {
	type plain CommandState
	v := struct {
		plain
		Memlock *Rlimit `json:"memlock"`
	}{plain: plain(c)}
	if c.MemlockKnown {
		m := c.Memlock
		v.Memlock = &m
	}
	return json.Marshal(v)
}

// EnvSuggestion is a variable preflight proved right for this node
// (docs/contract.md: NCCL_IB_* only where preflight proves a value right).
type EnvSuggestion struct {
	Name   string `json:"name"`
	Value  string `json:"value"`
	Reason string `json:"reason"`
}

// Facts are the typed findings of Run that other packages use (cmd/ncclrun
// turns them into the launcher's configuration and the diagnosis facts).
// The zero value means nothing was found: no check ran.
type Facts struct {
	// Memlock is the memlock check's verdict. CMD's limit is
	// Report.Command.Memlock.
	Memlock MemlockFacts
	// ShmBytes is the size of /dev/shm; 0 when it could not be determined.
	ShmBytes int64
	// RDMA are the RDMA devices sysfs lists, with their ports and verbs
	// nodes (rdma.details.devices); NoRDMA says sysfs lists none at all (a
	// container without /dev/infiniband still sees the host's devices).
	RDMA   []RDMADevice
	NoRDMA bool
	// GPUDirect is what the gpudirect check found; nil when it did not
	// apply (no GPU or no RDMA device) or did not run.
	GPUDirect *GPUDirectFacts
	// NCCLVersion is the NCCL library the env-sanity check found on disk;
	// the zero value when none was found, the check did not run, or, with
	// VersionOnDemand, no rule needed it.
	NCCLVersion NCCLVersion
}

// MemlockFacts are the memlock check's verdict.
type MemlockFacts struct {
	// Rule is the rule table's row (memlock.details.rule); Fix its advice,
	// "" when nothing needs fixing.
	Rule string
	Fix  string
	// Source says in one sentence where a Slurm task's limit came from
	// (slurmd's own, the submitting shell's, or srun passing ncclrun's on)
	// and how that was learned; "" where there is nothing to say
	// (docs/slurm.md). SourceFix is the fix for that source, "" when the
	// source is unknown; it is set even where the check did not judge
	// the limit (no RDMA device), for a memlock failure seen in CMD's output.
	Source    string
	SourceFix string
}

// GPUDirectFacts say which GPUDirect RDMA peer-memory path the host offers.
type GPUDirectFacts struct {
	// NvMem: the legacy peer-memory module (sys/kernel/mm/memory_peers/
	// nv_mem or nv_mem_nc), which every NCCL version detects.
	NvMem bool
	// NvidiaPeermem: the nvidia_peermem module (sys/module/nvidia_peermem).
	NvidiaPeermem bool
	// DMABuf: the kernel supports DMA-BUF (>= 5.12).
	DMABuf bool
}
