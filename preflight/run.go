package preflight

import (
	"context"
	"os"

	"github.com/ncclrun/ncclrun/internal/environ"
)

// Run performs every check and returns the report: environment, memlock,
// capabilities, rdma, shm, gpu, gpudirect, network, env-sanity, in that order. It never
// exits, prints or changes the system; it calls opts.Prober at most once.
// When ctx is done, the checks not yet run are reported as skipped.
func Run(ctx context.Context, opts Options) Report {
	return run(ctx, newRoot(opts.Root), opts, true)
}

// run is Run over s; treeEnvOK lets a tree's recorded environment replace
// opts.Env.
func run(ctx context.Context, s sysRoot, opts Options, treeEnvOK bool) Report {
	defer s.close()
	envList := opts.Env
	if s.t != nil && treeEnvOK {
		if e, ok := treeEnv(s); ok {
			envList = e
		}
	}
	if envList == nil {
		envList = os.Environ()
	}
	env := environ.Map(envList)
	// NCCL's configuration files count as set, the environment wins.
	confVars, confFiles := ncclConfig(s, envList)
	merged := make(map[string]string, len(env)+len(confVars))
	for k, v := range confVars {
		merged[k] = v
	}
	for k, v := range env {
		merged[k] = v
	}

	// NCCL's version needs only the variables and the library directories,
	// and listing those is the slowest part of a start; the interfaces
	// come from two netlink dumps (links, addresses). On the live system
	// both run beside the other checks. A tree's readers share its
	// warnings and Record's order, so there they run in their turn.
	// With VersionOnDemand the version is read, in turn, only where a
	// rule needs it.
	version := func() NCCLVersion { return ncclVersion(s, merged) }
	onDemand := opts.VersionOnDemand && s.t == nil
	type ifList struct {
		ifs []NetInterface
		err error
	}
	netIfs := func() ifList { l, err := interfaces(s); return ifList{l, err} }
	if s.t == nil {
		if !onDemand {
			vch := make(chan NCCLVersion, 1)
			go func() { vch <- ncclVersion(s, merged) }()
			version = func() NCCLVersion { return <-vch }
		}
		nch := make(chan ifList, 1)
		go func() { l, err := interfaces(s); nch <- ifList{l, err} }()
		netIfs = func() ifList { return <-nch }
	}

	rep := Report{Environment: detectEnvironment(s, env), NCCLConf: confVars}
	kind := rep.Environment.Kind
	envRes := checkEnvironment(rep.Environment)
	if len(confFiles) > 0 {
		envRes.Details["nccl_conf_files"] = confFiles
		envRes.Details["nccl_conf"] = confVars
	}
	rep.Checks = append(rep.Checks, envRes)

	creds := gatherCreds(s)
	if !s.live && opts.MemlockBefore == nil {
		opts.MemlockBefore = simulateRaise(&creds)
	}
	plan := planCommand(s, creds, opts.Plan, kind)
	rep.Command = plan.cmd

	type step struct {
		id  string
		run func() Result
	}
	var verdict memlockVerdict
	var gpus gpuFacts
	var gpuProblems []string
	haveRDMA := false
	steps := []step{
		{IDMemlock, func() Result {
			r, v := checkMemlock(s, opts, creds, plan, kind)
			crioAdvice(s, kind, &r)
			verdict = v
			rep.Facts.Memlock = MemlockFacts{Rule: v.rule, Fix: r.Fix}
			if creds.memlockErr == nil {
				before := creds.memlock
				if opts.MemlockBefore != nil {
					before = *opts.MemlockBefore
				}
				rep.Facts.Memlock.Source, rep.Facts.Memlock.SourceFix = slurmAdvice(s, kind, before, creds.memlock, opts.Plan.Exec, &r)
				rep.Facts.Memlock.Fix = r.Fix
			}
			return r
		}},
		{IDCapabilities, func() Result { return checkCapabilities(creds, plan, verdict, kind) }},
		{IDRDMA, func() Result {
			r, devs := checkRDMA(s, merged, kind)
			haveRDMA = r.Status != Skip
			rep.Facts.RDMA, rep.Facts.NoRDMA = devs, len(devs) == 0
			return r
		}},
		{IDShm, func() Result {
			gpus, gpuProblems = readGPUs(s)
			r, size := checkShm(s, gpus.count(), kind)
			rep.Facts.ShmBytes = size
			return r
		}},
		{IDGPU, func() Result { return checkGPU(gpus, gpuProblems) }},
		{IDGPUDirect, func() Result {
			r, g := checkGPUDirect(s, gpus, haveRDMA)
			rep.Facts.GPUDirect = g
			return r
		}},
		{IDNetwork, func() Result { l := netIfs(); return checkNetwork(l.ifs, l.err, merged) }},
		{IDEnvSanity, func() Result {
			r, v := checkSanity(s, sanityInput{env: merged, kind: kind, uid: rep.Command.UID, gpus: gpus.count(), ranks: opts.Ranks, ranksFrom: opts.RanksFrom}, version, onDemand)
			rep.Facts.NCCLVersion = v
			return r
		}},
	}
	for _, st := range steps {
		if err := ctx.Err(); err != nil {
			rep.Checks = append(rep.Checks, Result{ID: st.id, Status: Skip, Summary: "Not checked: " + err.Error()})
			continue
		}
		rep.Checks = append(rep.Checks, st.run())
	}
	if s.t != nil {
		rep.Warnings = s.t.warnings
	}
	return rep
}
