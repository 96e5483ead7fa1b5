package nccllog

import (
	"io"
	"os"
	"path/filepath"

	"github.com/ncclrun/ncclrun/internal/cmdkind"
	"github.com/ncclrun/ncclrun/internal/environ"
	"github.com/ncclrun/ncclrun/preflight"
)

// When the transport probe serves a run (docs/diagnosis.md "What run can
// learn at NCCL_DEBUG=WARN"): where NCCL would run at WARN on a node with
// GPUs and usable RDMA ports, its INIT and NET INFO lines go to the Probe's
// private NCCL_DEBUG_FILE instead, and the lines NCCL would have printed
// at WARN reach stdout through the Gate. The child's output gains no line.

// ProbeOff says why the probe cannot serve a run of cmd, "" when it can:
// env is the user's environment and conf what NCCL's config files set
// (a NCCL_DEBUG* variable set there is the user's), stdoutFile says that
// run writes CMD's stdout to a pipe or a file, not a terminal
// (StdoutFile), rep is preflight's report. The caller's own reasons (a
// flag that turns it off) come first and are the caller's.
func ProbeOff(env []string, conf map[string]string, cmd cmdkind.Command, stdoutFile bool, rep preflight.Report) string {
	for _, name := range []string{"NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE"} {
		if _, set := environ.Lookup(env, name); set {
			return name + " is set"
		}
		if _, set := conf[name]; set {
			return name + " is set in NCCL's config file"
		}
	}
	// The user's NCCL_DEBUG, even WARN, is theirs: it is never overridden.
	if _, set := environ.Lookup(env, "NCCL_DEBUG"); set {
		return "NCCL_DEBUG is set"
	}
	if _, set := conf["NCCL_DEBUG"]; set {
		return "NCCL_DEBUG is set in NCCL's config file"
	}
	if name := cmd.Remote(); name != "" {
		// They inherit NCCL_* but not the private directory: there NCCL's
		// fopen fails and it prints INFO to stdout after all.
		return name + " starts ranks on other hosts"
	}
	if !stdoutFile {
		return "stdout is a terminal or not a file"
	}
	if g, ok := rep.Check(preflight.IDGPU); !ok || g.Status == preflight.Skip {
		return "no GPU"
	}
	if len(preflight.UsablePorts(rep.Facts.RDMA)) == 0 {
		return "no usable RDMA port"
	}
	return ""
}

// StdoutFile reports whether w, run's stdout, is a pipe or a file: an
// *os.File that is not a terminal.
func StdoutFile(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice == 0
}

// Env is the variables that send NCCL's INIT and NET INFO lines to the
// probe's directory, each with the reason a user is shown.
func (p *Probe) Env() []environ.Var { return ProbeEnv(p.Dir) }

// ProbeEnv is the probe's variables for the private directory dir (made
// for each run: `ncclrun env` shows a pattern of its name).
func ProbeEnv(dir string) []environ.Var {
	why := "ncclrun's transport probe (off for launchers of remote ranks and on a terminal): NCCL's INIT/NET INFO lines go to a private file ncclrun reads, in a directory made for each run; its WARN lines still reach stdout at once (--no-transport-probe turns it off)"
	return []environ.Var{
		{Name: "NCCL_DEBUG", Value: "INFO", Reason: why},
		{Name: "NCCL_DEBUG_SUBSYS", Value: "INIT,NET", Reason: why},
		{Name: "NCCL_DEBUG_FILE", Value: filepath.Join(dir, probeFilePrefix+"%h.%p"), Reason: why},
	}
}

// ProbeDirPattern is the name NewProbe's directories have, "*" standing
// for what makes each one new.
func ProbeDirPattern() string { return filepath.Join(os.TempDir(), probeDirPrefix+"*") }
