package main

import (
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
// userEnv is the user's environment, conf what NCCL's config files set,
// stdoutFile whether run's stdout is a pipe or a file (nccllog.StdoutFile).
func probeOff(s settings, userEnv []string, conf map[string]string, rep preflight.Report, cmd cmdkind.Command, stdoutFile bool) string {
	switch {
	case s.noTransportProbe:
		return "--no-transport-probe"
	case s.noWatch:
		return "--no-watch"
	case !strings.EqualFold(s.ncclDebug, "WARN"):
		return "--nccl-debug is not WARN"
	}
	return nccllog.ProbeOff(userEnv, conf, cmd, stdoutFile, rep)
}

// envProbe is what `ncclrun env` shows of the probe: its variables when a
// run on this node would have it (as planProbe's Env),
// for a CMD whose ranks all run here and a stdout that is a pipe or a file,
// as in a pod; the directory's name is a pattern, since each run makes its
// own.
func envProbe(s settings, userEnv []string, rep preflight.Report) []launcher.EnvVar {
	if probeOff(s, userEnv, rep.NCCLConf, rep, cmdkind.Command{}, true) != "" {
		return nil
	}
	return nccllog.ProbeEnv(nccllog.ProbeDirPattern())
}

// planProbe starts planning the probe for run's child: nil when it is off
// (probeOff) or the directory cannot be made; otherwise its Env are the
// variables for composeEnv. The directory is owned by CMD's uid
// when run drops to another user.
func planProbe(e *env, j *runJob, rep preflight.Report) *nccllog.Probe {
	if probeOff(j.s, e.environ, rep.NCCLConf, rep, j.command(e.environ), nccllog.StdoutFile(e.stdout)) != "" {
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
