package main

import (
	"os"
	"strings"

	"github.com/ncclrun/ncclrun/diagnosis"
	"github.com/ncclrun/ncclrun/internal/environ"
	"github.com/ncclrun/ncclrun/preflight"
)

// facts turn preflight's report into what the matcher needs to tell
// memlock from other registration failures.
func facts(r preflight.Report, minMemlock int64) diagnosis.Facts {
	cs := r.Command
	f := diagnosis.Facts{
		Known:    true,
		Platform: r.Environment.Kind,
		MemlockAdequate: cs.IPCLockEffective || cs.Memlock.Soft == preflight.Unlimited ||
			(minMemlock > 0 && cs.Memlock.Soft >= minMemlock),
		Seen:       cs.MemlockState(),
		MemlockFix: r.Facts.Memlock.Fix,
		ShmBytes:   r.Facts.ShmBytes,
		// Only a host whose sysfs lists no RDMA device at all: a container
		// without /dev/infiniband still sees the host's devices there.
		NoRDMA: r.Facts.NoRDMA,
	}
	// A Slurm task's limit says where it came from, and its fix is the
	// one for that source even where doctor did not judge the limit.
	if src := r.Facts.Memlock.Source; src != "" {
		f.Seen += "; " + src
	}
	if f.MemlockFix == "" {
		f.MemlockFix = r.Facts.Memlock.SourceFix
	}
	// Preflight's facts are this host's: lines of other hosts are judged
	// without them (diagnosis.Facts.Host).
	if h, err := os.Hostname(); err == nil {
		f.Host = h
	}
	transportFacts(r, &f)
	return f
}

// transportFacts adds what preflight saw of the transports NCCL could use:
// the RDMA ports usable from CMD's view and the GPUDirect RDMA
// peer-memory module on the host. With them a "No device found" or a
// socket/tcp fallback on a node with usable ports is a certain
// degraded-transport, and "GPU Direct RDMA Disabled" names its cause.
func transportFacts(r preflight.Report, f *diagnosis.Facts) {
	f.RDMAPorts = preflight.UsablePorts(r.Facts.RDMA)
	if g := r.Facts.GPUDirect; g != nil {
		f.GDRModule = gdrModule(*g)
	}
}

// gdrModule names the peer-memory module the gpudirect check found.
func gdrModule(g preflight.GPUDirectFacts) string {
	switch {
	case g.NvMem:
		return diagnosis.GDRModuleNvMem
	case g.NvidiaPeermem:
		return diagnosis.GDRModuleNvidiaPeermem
	}
	return diagnosis.GDRModuleNone
}

// ncclSetting is what NCCL reads for name: CMD's environment env (as run
// composes it, --no-ib's NCCL_IB_DISABLE and the like included) wins over
// NCCL's configuration file conf, as in NCCL.
func ncclSetting(env []string, conf map[string]string, name string) string {
	if v, ok := environ.Lookup(env, name); ok {
		return v
	}
	return conf[name]
}

// ibDisabled reports whether CMD runs with NCCL_IB_DISABLE=1.
func ibDisabled(env []string, conf map[string]string) bool {
	return strings.TrimSpace(ncclSetting(env, conf, "NCCL_IB_DISABLE")) == "1"
}
