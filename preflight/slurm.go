package preflight

import (
	"bytes"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/ncclrun/ncclrun/internal/advice"
	"github.com/ncclrun/ncclrun/internal/units"
)

// Where a Slurm task's RLIMIT_MEMLOCK comes from (docs/slurm.md). A task
// inherits slurmd's limits through slurmstepd, which slurmd starts for
// every step with its own limits; with PropagateResourceLimits at its
// default (ALL) slurmstepd then sets the task's soft limit to the soft
// limit of the shell that ran srun or sbatch, capped by slurmd's hard
// limit. The hard limit is never propagated, and Slurm 22.05 leaves no
// SLURM_RLIMIT_* variable in the task's environment, so the one witness is
// slurmstepd itself: an ancestor of the task whose /proc/PID/limits (mode
// 0444) still holds slurmd's limits.

// Values of MemlockFacts.SlurmSource and memlock.details.slurm.source.
const (
	// SourceSlurmd: the limit is slurmd's own (slurmstepd's hard limit).
	SourceSlurmd = "slurmd"
	// SourceSubmitHost: the soft limit was propagated from the shell that
	// submitted the job (PropagateResourceLimits).
	SourceSubmitHost = "submit-host"
	// SourceSrun: CMD is srun, sbatch or salloc, which pass ncclrun's own
	// soft limit on to every task they start.
	SourceSrun = "srun"
	// SourceUnknown: on Slurm, but no slurmstepd's limits could be read.
	SourceUnknown = "unknown"
)

// maxAncestors bounds the walk from ncclrun up to slurmstepd.
const maxAncestors = 64

// slurmstepd is the nearest ancestor called slurmstepd, found through
// proc/<pid>/stat under the root, and its memlock limit.
type slurmstepd struct {
	pid     int // 0: none found
	memlock Rlimit
	err     error // its limits could not be read
	why     string
}

// statComm returns the comm and the ppid of a /proc/<pid>/stat line
// (proc(5)): "PID (COMM) STATE PPID ...", COMM may hold spaces and ')'.
func statComm(b []byte) (comm string, ppid int, err error) {
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return "", 0, fmt.Errorf("%w: stat line without (comm)", ErrMalformed)
	}
	f := strings.Fields(string(b[end+1:]))
	if len(f) < 2 {
		return "", 0, fmt.Errorf("%w: stat line too short", ErrMalformed)
	}
	ppid, err = strconv.Atoi(f[1])
	if err != nil {
		return "", 0, fmt.Errorf("%w: stat ppid %q", ErrMalformed, f[1])
	}
	return string(b[open+1 : end]), ppid, nil
}

// findSlurmstepd walks from proc/self up the parent chain.
func findSlurmstepd(s sysRoot) slurmstepd {
	b, err := s.readFile("proc/self/stat")
	if err != nil {
		return slurmstepd{why: "proc/self/stat could not be read"}
	}
	_, pid, err := statComm(b)
	if err != nil {
		return slurmstepd{why: "proc/self/stat could not be parsed"}
	}
	for range maxAncestors {
		if pid <= 1 {
			break
		}
		p := "proc/" + strconv.Itoa(pid)
		b, err := s.readFile(p + "/stat")
		if err != nil {
			return slurmstepd{why: fmt.Sprintf("the ancestor pid %d could not be read (%s/stat)", pid, p)}
		}
		comm, ppid, err := statComm(b)
		if err != nil {
			return slurmstepd{why: fmt.Sprintf("%s/stat could not be parsed", p)}
		}
		if comm == "slurmstepd" {
			st := slurmstepd{pid: pid}
			if b, err := s.readFile(p + "/limits"); err != nil {
				st.err = err
			} else if st.memlock, err = parseMemlockLimits(bytes.NewReader(b)); err != nil {
				st.err = err
			}
			return st
		}
		pid = ppid
	}
	return slurmstepd{why: "no slurmstepd among ncclrun's ancestors (a container with a PID namespace of its own, or a process not started by srun or sbatch)"}
}

// submitCommand reports whether CMD is a Slurm client that propagates
// ncclrun's limits to the tasks it starts.
func submitCommand(exec string) bool {
	switch path.Base(exec) {
	case "srun", "sbatch", "salloc":
		return true
	}
	return false
}

// slurmMemlock says where the memlock limit of a Slurm task comes from:
// a sentence for the summary, the source, the fix in slurm.conf's and
// systemd's words, and the details. before is the limit as found (before
// ncclrun's raise). src is "" where there is nothing to say: not on
// Slurm, an unlimited soft limit, or a soft limit above slurmstepd's.
func slurmMemlock(s sysRoot, kind Platform, before Rlimit, exec string) (sentence, src, fix string, d map[string]any) {
	if before.Soft == Unlimited {
		return "", "", "", nil
	}
	if submitCommand(exec) {
		return fmt.Sprintf("%s passes this soft limit on to every task it starts (Slurm's PropagateResourceLimits, ALL by default), capped by slurmd's hard limit", path.Base(exec)),
			SourceSrun, advice.Text(advice.SlurmPropagation, advice.Slurm, advice.Who{}), map[string]any{"source": SourceSrun}
	}
	if kind != Slurm {
		return "", "", "", nil
	}
	st := findSlurmstepd(s)
	d = map[string]any{}
	switch {
	case st.pid == 0:
		d["source"], d["how"] = SourceUnknown, st.why
		return "whether the limit is slurmd's own or the submitting shell's is unknown: " + st.why, SourceUnknown, "", d
	case st.err != nil:
		d["source"], d["how"], d["slurmstepd_pid"] = SourceUnknown, st.err.Error(), st.pid
		return fmt.Sprintf("whether the limit is slurmd's own or the submitting shell's is unknown: slurmstepd (pid %d) is an ancestor, but its limits could not be read (%v)", st.pid, st.err), SourceUnknown, "", d
	}
	how := fmt.Sprintf("read from /proc/%d/limits of slurmstepd, an ancestor of this process, which slurmd starts with its own limits", st.pid)
	d["slurmstepd_pid"] = st.pid
	d["slurmstepd_soft"], d["slurmstepd_hard"] = rlimitDetail(st.memlock.Soft), rlimitDetail(st.memlock.Hard)
	d["how"] = how
	switch {
	case before.Hard != st.memlock.Hard:
		// Slurm propagates soft limits only: a hard limit other than
		// slurmstepd's was set after it.
		d["source"] = SourceUnknown
		return fmt.Sprintf("the hard limit %s differs from slurmd's %s (%s): Slurm propagates soft limits only, so a process between slurmstepd and ncclrun (a job script's ulimit, a container runtime) set it", units.FormatSize(before.Hard), fmtLimit(st.memlock), how),
			SourceUnknown, "", d
	case st.memlock.Soft == Unlimited || before.Soft < st.memlock.Soft:
		d["source"] = SourceSubmitHost
		return fmt.Sprintf("the soft limit %s is below slurmd's %s, so Slurm's PropagateResourceLimits (ALL by default) set it from the shell that ran srun or sbatch on the submitting host (slurmd's limit %s)", units.FormatSize(before.Soft), fmtLimit(st.memlock), how),
			SourceSubmitHost, advice.Text(advice.SlurmPropagation, advice.Slurm, advice.Who{}), d
	case before.Soft == st.memlock.Soft:
		d["source"] = SourceSlurmd
		return fmt.Sprintf("the limit is slurmd's own: slurmstepd (pid %d) has RLIMIT_MEMLOCK %s (%s), and every task inherits it", st.pid, fmtLimit(st.memlock), how),
			SourceSlurmd, advice.Text(advice.SlurmdMemlock, advice.Slurm, advice.Who{}), d
	}
	return "", "", "", nil
}

// slurmAdvice adds slurmMemlock's answer to the memlock result: the
// details always, the sentence where the check warned or failed or (with
// a known source) the raise changed the limit, and the fix in place of
// the generic Slurm text.
// It returns the sentence and the fix.
func slurmAdvice(s sysRoot, kind Platform, before, after Rlimit, exec string, r *Result) (string, string) {
	sentence, src, fix, d := slurmMemlock(s, kind, before, exec)
	if src == "" {
		return "", ""
	}
	if r.Details != nil {
		r.Details["slurm"] = d
	}
	if r.Status == Warn || r.Status == Fail || (before != after && src != SourceUnknown) {
		r.Summary += "; " + sentence
	}
	if fix != "" && r.Fix != "" {
		generic := advice.Text(advice.RaiseMemlock, advice.Slurm, advice.Who{})
		if strings.Contains(r.Fix, generic) {
			r.Fix = strings.Replace(r.Fix, generic, fix, 1)
		} else if src == SourceSrun {
			r.Fix = fix + "; or " + r.Fix
		}
	}
	return sentence, fix
}
