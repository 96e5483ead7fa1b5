package main

import (
	"io"
	"strings"

	"github.com/ncclrun/ncclrun/internal/cmdkind"
	"github.com/ncclrun/ncclrun/launcher"
	"github.com/ncclrun/ncclrun/nccllog"
	"github.com/ncclrun/ncclrun/preflight"
)

// The transport probe (nccllog.ProbeOff says when it serves a run): run's
// flags turn it off first, then the probe's directory and variables join
// the child's plan.

// probeOff says why the probe is off for a run of cmd, "" when it may run.
// userEnv is the user's environment, conf what NCCL's config files set.
func probeOff(s settings, userEnv []string, conf map[string]string, rep preflight.Report, cmd cmdkind.Command, stdout io.Writer) string {
	switch {
	case s.noTransportProbe:
		return "--no-transport-probe"
	case s.noWatch:
		return "--no-watch"
	case !strings.EqualFold(s.ncclDebug, "WARN"):
		return "--nccl-debug is not WARN"
	}
	return nccllog.ProbeOff(userEnv, conf, cmd, stdout, rep)
}

// planProbe starts planning the probe for run's child: nil when it is off
// (probeOff) or the directory cannot be made; otherwise j.s.transportEnv
// holds its variables for composeEnv. The directory is owned by CMD's uid
// when run drops to another user.
func planProbe(e *env, j *runJob, rep preflight.Report) *nccllog.Probe {
	if probeOff(j.s, e.environ, rep.NCCLConf, rep, j.command(e.environ), e.stdout) != "" {
		return nil
	}
	uid, gid := -1, -1
	if j.user != nil {
		uid, gid = int(j.user.UID), int(j.user.GID)
	}
	probe, err := nccllog.NewProbe(e.stdout, uid, gid)
	if err != nil {
		return nil
	}
	j.s.transportEnv = probe.Env()
	return probe
}

// attachProbe makes p's child use the probe when composeEnv added all of
// its variables (else it removes the directory): run's stdout goes through
// the gate, the files are the probe's to read (not collect's), and the
// directory goes with p's cleanup.
func attachProbe(p *childPlan, probe *nccllog.Probe, added []launcher.EnvVar) {
	n := 0
	for _, a := range added {
		for _, v := range probe.Env() {
			if a.Name == v.Name {
				n++
			}
		}
	}
	if n != len(probe.Env()) {
		probe.Remove()
		return
	}
	p.probe = probe
	p.debugFile = ""
	p.cfg.Stdout = probe.Gate() // over p.cfg.Stdout, which is e.stdout
	cleanup := p.cleanup
	p.cleanup = func() { cleanup(); probe.Remove() }
}
