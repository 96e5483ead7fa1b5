package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/ncclrun/ncclrun/internal/environ"
	"github.com/ncclrun/ncclrun/launcher"
	"github.com/ncclrun/ncclrun/nccllog"
	"github.com/ncclrun/ncclrun/preflight"
)

// The transport probe (docs/diagnosis.md "What run can learn at
// NCCL_DEBUG=WARN"): where NCCL would run at ncclrun's WARN level on a node
// with GPUs and usable RDMA ports, run asks NCCL for its INIT and NET INFO
// lines in a private NCCL_DEBUG_FILE instead, diagnoses them (the
// transport NCCL chose, GPUDirect RDMA, NCCL's version) and writes the
// lines NCCL would have printed at WARN (its WARN lines and the version
// line) to run's stdout, at line boundaries of the relayed output. The
// child's output gains no line.

// probeOff says why the probe is off for this run, "" when it may run.
// userEnv is the user's environment, conf what NCCL's config files set.
func probeOff(s settings, userEnv []string, conf map[string]string, rep preflight.Report, path string, stdout io.Writer) string {
	switch {
	case s.noTransportProbe:
		return "--no-transport-probe"
	case s.noWatch:
		return "--no-watch"
	case !strings.EqualFold(s.ncclDebug, "WARN"):
		return "--nccl-debug is not WARN"
	}
	for _, name := range []string{"NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE"} {
		if _, set := environ.Lookup(userEnv, name); set {
			return name + " is set"
		}
		if _, set := conf[name]; set {
			return name + " is set in NCCL's config file"
		}
	}
	// The user's NCCL_DEBUG, even WARN, is theirs: ncclrun never overrides it.
	if _, set := environ.Lookup(userEnv, "NCCL_DEBUG"); set {
		return "NCCL_DEBUG is set"
	}
	if _, set := conf["NCCL_DEBUG"]; set {
		return "NCCL_DEBUG is set in NCCL's config file"
	}
	if (launcher.Command{Path: path}).Remote() {
		// They inherit NCCL_* but not the private directory: there NCCL's
		// fopen fails and it prints INFO to stdout after all.
		return filepath.Base(path) + " starts ranks on other hosts"
	}
	if f, ok := stdout.(*os.File); !ok || isTTY(f) {
		return "stdout is a terminal or not a file"
	}
	if g, ok := rep.Check(preflight.IDGPU); !ok || g.Status == preflight.Skip {
		return "no GPU"
	}
	if len(usablePorts(rep.Facts.RDMA)) == 0 {
		return "no usable RDMA port"
	}
	return ""
}

// isTTY reports whether f is a terminal.
func isTTY(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// transportProbe is NCCL's private debug directory while CMD runs.
type transportProbe struct{ *nccllog.Probe }

// planProbe starts planning the probe for run's child: nil when it is off
// (probeOff) or the directory cannot be made; otherwise j.s.transportEnv
// holds its variables for composeEnv.
func planProbe(e *env, j *runJob, rep preflight.Report) *transportProbe {
	if probeOff(j.s, e.environ, rep.NCCLConf, rep, j.path, e.stdout) != "" {
		return nil
	}
	uid, gid := -1, -1
	if j.user != nil {
		uid, gid = int(j.user.UID), int(j.user.GID)
	}
	probe, vars := newTransportProbe(e.stdout, uid, gid)
	j.s.transportEnv = vars
	return probe
}

// attach makes p's child use the probe when composeEnv added all of its
// variables (else it removes the directory and returns false): run's
// stdout goes through the gate, the files are the probe's to read (not
// collect's), and the directory goes with p's cleanup.
func (probe *transportProbe) attach(p *childPlan, added []launcher.EnvVar) bool {
	n := 0
	for _, a := range added {
		for _, v := range probe.vars() {
			if a.Name == v {
				n++
			}
		}
	}
	if n != len(probe.vars()) {
		probe.Remove()
		return false
	}
	p.probe = probe
	p.debugFile = ""
	p.cfg.Stdout = probe.Gate() // over p.cfg.Stdout, which is e.stdout
	cleanup := p.cleanup
	p.cleanup = func() { cleanup(); probe.Remove() }
	return true
}

func (probe *transportProbe) vars() []string {
	return []string{"NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE"}
}

// newTransportProbe makes the private directory (owned by CMD's uid when
// run drops to another user) and the variables that send NCCL's INIT and
// NET INFO there. It returns nil when the directory cannot be made.
func newTransportProbe(stdout io.Writer, uid, gid int) (*transportProbe, []launcher.EnvVar) {
	np, err := nccllog.NewProbe(stdout, uid, gid)
	if err != nil {
		return nil, nil
	}
	why := "ncclrun's transport probe: NCCL's INIT/NET INFO lines go to a private file ncclrun reads, its WARN lines still reach stdout (--no-transport-probe turns it off)"
	return &transportProbe{np}, []launcher.EnvVar{
		{Name: "NCCL_DEBUG", Value: "INFO", Reason: why},
		{Name: "NCCL_DEBUG_SUBSYS", Value: "INIT,NET", Reason: why},
		{Name: "NCCL_DEBUG_FILE", Value: np.DebugFile(), Reason: why},
	}
}
