// Package demo is the README's first command (`make demo`, `ncclrun demo`):
// a fake two-rank NCCL job fails under a default container's memlock limit
// and capabilities, ncclrun explains why, and the same job passes with the
// fix this machine allows. It needs no GPU, no InfiniBand and no root.
//
// It drives the ncclrun binary as a user would (`ncclrun run ... --
// ncclrun fake-nccl ...`), so it shows the real relay and the real
// diagnosis; it is not a test harness for them.
//
// The fake job must be in the credential state of a real CMD (python,
// torchrun), which carries no file capabilities. ncclrun may carry them
// (Dockerfile.base gives it cap_ipc_lock+p), and an execve of such a file
// clears the ambient set through which ncclrun hands CAP_IPC_LOCK to CMD;
// with no effective bit on the file the capability comes back permitted but
// not effective, so the fake job's mlock would fail where a real CMD's
// passes. So when its own executable carries the security.capability
// xattr, the demo runs the fake job from a plain copy of itself (a copy has
// no xattrs) in its temporary directory. Where that copy cannot run (a
// noexec temporary directory) the fake job stays ncclrun itself, and the
// demo shows the memlock-limit fix and says why the capability fix cannot
// be shown. Rejected: always falling back to the limit fix (the demo would
// never show the fix Dockerfile.base exists for), raising the capability
// inside fake-nccl (a fix no real CMD gets), and an effective bit on the
// file (ncclrun would not start where IPC_LOCK is not in the bounding set).
package demo

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/ncclrun/ncclrun/internal/rlimit"
	"github.com/ncclrun/ncclrun/internal/units"
)

// FakePin is what each fake rank pins in the failing run: more than the
// 64 KiB of the container default the demo reproduces and than the 8 MiB
// kernel/systemd default, as NCCL's registrations are.
const FakePin int64 = 16 << 20

// FailLimit is the memlock limit of the failing run: a default Docker
// container's or Kubernetes pod's.
const FailLimit int64 = 64 << 10

// Ranks is the number of fake NCCL processes in each run.
const Ranks = 2

// ErrUnsupported is returned by the state probe outside Linux.
var ErrUnsupported = errors.New("demo: needs Linux (RLIMIT_MEMLOCK and capabilities)")

// State is what decides which fix the demo can show on this machine.
type State struct {
	// IPCLockPermitted: ncclrun holds CAP_IPC_LOCK in its permitted set
	// (root, a cap_ipc_lock+p file capability), so it can keep it for CMD.
	IPCLockPermitted bool
	// UserNamespace: the process is in a user namespace other than the
	// initial one, where capabilities do not bypass RLIMIT_MEMLOCK.
	UserNamespace bool
	// Memlock is RLIMIT_MEMLOCK.
	Memlock rlimit.Limit
	// FileCaps: the demo's own executable carries file capabilities (the
	// security.capability xattr), which no real CMD has.
	FileCaps bool
}

// FixKind names the fix the second run applies.
type FixKind int

const (
	// FixNone: the machine allows no fix the demo can show (hard limit of
	// less than a page and no usable CAP_IPC_LOCK).
	FixNone FixKind = iota
	// FixCapability: keep CAP_IPC_LOCK, as `docker run --cap-add IPC_LOCK`
	// does for a root container; the 64 KiB limit stays.
	FixCapability
	// FixLimit: use the memlock limit the machine allows (ncclrun raises
	// soft to hard) and pin within it.
	FixLimit
)

// Fix is the second run's remedy: how it differs from the failing run.
type Fix struct {
	Kind FixKind
	// Pin is the size each rank pins in the fixed run.
	Pin int64
	// Why is one sentence on why this fix was chosen.
	Why string
	// Equivalent lists the production settings that give the same result.
	Equivalent []string
}

const pageSize = 4096

// ChooseFix picks the fix to demonstrate from the machine's state: the
// capability where ncclrun holds CAP_IPC_LOCK outside a user namespace,
// else the machine's own memlock limit with a pin that fits under it. It
// assumes the fake job runs in a real CMD's credential state (Plan).
func ChooseFix(s State) Fix {
	if s.IPCLockPermitted && !s.UserNamespace {
		return Fix{
			Kind: FixCapability,
			Pin:  FakePin,
			Why:  "ncclrun holds CAP_IPC_LOCK in its permitted set, so the fixed run keeps it and the 64 KiB limit no longer applies",
			Equivalent: []string{
				"docker run --cap-add IPC_LOCK ... (root, or --user N with ncclrun's cap_ipc_lock+p file capability as Dockerfile.base sets it; else --ulimit memlock=-1:-1)",
				`Kubernetes, root container: securityContext.capabilities.add: ["IPC_LOCK"]; to train as a non-root user, also add SETUID,SETGID and run "ncclrun --user=UID:GID -- ..." (examples/kubernetes/a-root-drop-to-user.yaml)`,
			},
		}
	}
	reason := "ncclrun holds no usable CAP_IPC_LOCK here"
	if s.UserNamespace {
		reason = "this is a user namespace, where CAP_IPC_LOCK does not lift RLIMIT_MEMLOCK"
	}
	return limitFix(s, reason)
}

// limitFix is the fix by the machine's memlock limit; reason says why the
// capability fix is not shown.
func limitFix(s State, reason string) Fix {
	pin := FakePin
	if s.Memlock.Hard >= 0 && s.Memlock.Hard < pin {
		pin = s.Memlock.Hard / pageSize * pageSize
	}
	if pin <= 0 {
		return Fix{Kind: FixNone, Why: fmt.Sprintf("%s, and the hard RLIMIT_MEMLOCK is %s: nothing on this machine can pin memory", reason, units.FormatSize(s.Memlock.Hard))}
	}
	if pin <= FailLimit {
		// Pinning within the failing run's own limit shows no fix.
		return Fix{Kind: FixNone, Why: fmt.Sprintf("%s, and the hard RLIMIT_MEMLOCK is %s, no more than the failing run's %s: this machine allows no more to pin than a default container does", reason, units.FormatSize(s.Memlock.Hard), units.FormatSize(FailLimit))}
	}
	return Fix{
		Kind: FixLimit,
		Pin:  pin,
		Why:  fmt.Sprintf("%s, so the fixed run uses the memlock limit this machine allows (soft %s, hard %s; ncclrun raises soft to hard), and each rank pins %s", reason, units.FormatSize(s.Memlock.Soft), units.FormatSize(s.Memlock.Hard), units.FormatSize(pin)),
		Equivalent: []string{
			"docker run --ulimit memlock=-1:-1 ... (any user)",
			"Kubernetes: LimitMEMLOCK=infinity for containerd/CRI-O on the node (examples/kubernetes/c-node-memlock/)",
			"Slurm: PropagateResourceLimitsExcept=MEMLOCK; bare metal: memlock unlimited in /etc/security/limits.d/",
		},
	}
}

// Plan is what the demo runs: the second run's fix and the fake job's
// executable.
type Plan struct {
	Fix Fix
	// Job is the fake job's executable: ncclrun itself, or a copy of it
	// without file capabilities.
	Job string
	// Copied: Job is that copy.
	Copied bool
}

// ChoosePlan picks the fix and the fake job's executable. self is
// ncclrun's binary; copied is a copy of it without file capabilities that
// was made and ran, "" when none was needed (st.FileCaps false) or none
// could be made or run. A fake job with ncclrun's file capabilities would
// hold CAP_IPC_LOCK permitted but not effective, so the capability fix is
// shown only from the copy; without one, the memlock limit is the fix.
func ChoosePlan(st State, self, copied string) Plan {
	switch {
	case !st.FileCaps:
		return Plan{Fix: ChooseFix(st), Job: self}
	case copied != "":
		return Plan{Fix: ChooseFix(st), Job: copied, Copied: true}
	}
	fix := ChooseFix(st)
	if fix.Kind == FixCapability {
		fix = limitFix(st, "the capability fix cannot be shown because the fake job is ncclrun itself, whose file capabilities keep CAP_IPC_LOCK out of its effective set (a real CMD here gets it)")
	}
	return Plan{Fix: fix, Job: self}
}

// Run runs the demo with self, the ncclrun binary, narrating on stdout;
// the runs' own output goes to stdout and stderr as ncclrun relays it. It
// returns 0 when the failing run failed with the memlock diagnosis and the
// fixed run passed without one, 1 otherwise.
func Run(self string, stdout, stderr io.Writer) int {
	st, err := probeState(self)
	if err != nil {
		fmt.Fprintf(stderr, "ncclrun: demo: %v\n", err)
		return 1
	}
	return run(self, st, stdout, stderr)
}

// report is the part of `ncclrun run --report` the demo reads.
type report struct {
	Diagnoses []struct {
		ID    string `json:"id"`
		Count int    `json:"count"`
	} `json:"diagnoses"`
	ExitCode int `json:"exit_code"`
}

func run(self string, st State, stdout, stderr io.Writer) int {
	dir, err := os.MkdirTemp("", "ncclrun-demo-")
	if err != nil {
		fmt.Fprintf(stderr, "ncclrun: demo: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	// A signal does not kill the demo before the directory is removed:
	// Ctrl-C reaches the run in progress too (the terminal's process
	// group), and the demo ends once that run has, with 128+N.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	interrupted := func() (int, bool) {
		select {
		case s := <-sigs:
			n := int(s.(syscall.Signal))
			fmt.Fprintf(stderr, "ncclrun: demo: stopped by signal %d (%v)\n", n, s)
			return 128 + n, true
		default:
			return 0, false
		}
	}
	say := func(format string, a ...any) { fmt.Fprintf(stdout, format+"\n", a...) }

	say("ncclrun demo: NCCL's locked-memory failure, its diagnosis and its fix, with a fake %d-rank NCCL job (no GPU needed).", Ranks)
	copied := ""
	if st.FileCaps {
		var err error
		if copied, err = copyWithoutFileCaps(self, dir); err != nil {
			say("ncclrun carries file capabilities and a real CMD (python, torchrun) has none, but no copy without them can run from %s (%v): the fake job is ncclrun itself.", filepath.Dir(dir), err)
		} else {
			say("ncclrun carries file capabilities and a real CMD (python, torchrun) has none: the fake job runs from a copy of ncclrun without them.")
		}
	}
	if code, stop := interrupted(); stop {
		return code
	}
	plan := ChoosePlan(st, self, copied)
	say("")
	say("[1/2] A default Docker container or Kubernetes pod: RLIMIT_MEMLOCK 64 KiB and no CAP_IPC_LOCK.")
	say("      Each rank pins %s with mlock(2), checked by the kernel as NCCL's ibv_reg_mr is.", units.FormatSize(FakePin))
	fail := []string{"run", "--memlock", "64KiB", "--drop-cap", "IPC_LOCK"}
	failCode, failRep, err := step(self, plan.Job, dir, "fail", fail, FakePin, stdout, stderr)
	if code, stop := interrupted(); stop {
		return code
	}
	if err != nil {
		fmt.Fprintf(stderr, "ncclrun: demo: %v\n", err)
		return 1
	}
	diagnosed := hasDiagnosis(failRep, "memlock")
	switch {
	case failCode != 0 && diagnosed:
		say("-> failed (exit status %d), and ncclrun named the cause: memlock.", failCode)
	case failCode == 0:
		say("-> unexpectedly passed: this machine lets a process pin past a 64 KiB limit without CAP_IPC_LOCK.")
	default:
		say("-> failed (exit status %d) but without the memlock diagnosis: see the output above.", failCode)
	}
	say("")

	fix := plan.Fix
	var fixed []string
	switch fix.Kind {
	case FixCapability:
		say("[2/2] With the fix: keep CAP_IPC_LOCK (still under the 64 KiB limit).")
		fixed = []string{"run", "--memlock", "64KiB"}
	case FixLimit:
		say("[2/2] With the fix: the memlock limit this machine allows instead of 64 KiB; each rank pins %s.", units.FormatSize(fix.Pin))
		if st.Memlock.Hard >= 0 {
			say("      (Real NCCL needs more than %s: on a node with an RDMA device ncclrun's preflight says so.)", units.FormatSize(st.Memlock.Hard))
		}
		fixed = []string{"run"}
	default:
		say("[2/2] No fix can be shown here: %s.", fix.Why)
		return 1
	}
	fixCode, fixRep, err := step(self, plan.Job, dir, "fixed", fixed, fix.Pin, stdout, stderr)
	if code, stop := interrupted(); stop {
		return code
	}
	if err != nil {
		fmt.Fprintf(stderr, "ncclrun: demo: %v\n", err)
		return 1
	}
	passed := fixCode == 0 && fixRep != nil && len(fixRep.Diagnoses) == 0
	if passed {
		say("-> passed.")
	} else {
		say("-> failed (exit status %d).", fixCode)
	}
	say("")
	say("Fix applied: %s.", fix.Why)
	say("The same fix in production:")
	for _, e := range fix.Equivalent {
		say("  %s", e)
	}
	if failCode != 0 && diagnosed && passed {
		say("Demo OK: the failure was diagnosed and the fix worked.")
		return 0
	}
	say("Demo FAILED: expected the first run to fail with the memlock diagnosis and the second to pass.")
	return 1
}

// copyWithoutFileCaps copies self to dir/ncclrun, which carries no xattrs
// and so no file capabilities, and runs the copy's `version` to check that
// it can run there. It returns the copy's path, or an error that says why
// it cannot be used.
func copyWithoutFileCaps(self, dir string) (string, error) {
	dst := filepath.Join(dir, "ncclrun")
	in, err := os.Open(self)
	if err != nil {
		return "", err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o700)
	if err != nil {
		return "", err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", err
	}
	if err := exec.Command(dst, "version").Run(); err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return "", pe.Err // "permission denied" on a noexec mount
		}
		return "", err
	}
	return dst, nil
}

// step runs `self ARGS --report FILE -- job fake-nccl --ranks 2 --pin
// SIZE`, echoing the command as a user would type it, and returns its exit
// status and report (nil when none was written). job is ncclrun or its
// copy, shown as "ncclrun" either way.
func step(self, job, dir, name string, args []string, pin int64, stdout, stderr io.Writer) (int, *report, error) {
	fake := []string{"fake-nccl", "--ranks", fmt.Sprint(Ranks), "--pin", sizeArg(pin)}
	fmt.Fprintf(stdout, "$ ncclrun %s -- ncclrun %s\n", strings.Join(args, " "), strings.Join(fake, " "))
	repPath := filepath.Join(dir, name+".json")
	argv := append(append([]string(nil), args...), "--report", repPath, "--")
	argv = append(append(argv, job), fake...)
	cmd := exec.Command(self, argv...)
	cmd.Stdout, cmd.Stderr = &drained{w: stdout}, stderr
	err := cmd.Run()
	code := 0
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			return 0, nil, fmt.Errorf("run %s: %w", self, err)
		}
		code = ee.ExitCode()
		if code < 0 {
			code = 128 // killed by a signal; the report says which
		}
	}
	data, err := os.ReadFile(repPath)
	if err != nil {
		return code, nil, nil
	}
	var rep report
	if err := json.Unmarshal(data, &rep); err != nil {
		return code, nil, fmt.Errorf("read report %q: %w", repPath, err)
	}
	return code, &rep, nil
}

// drained is a run's stdout: once its reader has gone (EPIPE: `ncclrun
// demo | head -1`), the rest of the run's output is read and dropped, as
// a stdout whose reader wants no more calls for, instead of failing the
// copy, and with it the run and the demo.
type drained struct {
	w    io.Writer
	gone bool
}

func (d *drained) Write(p []byte) (int, error) {
	if d.gone {
		return len(p), nil
	}
	n, err := d.w.Write(p)
	if errors.Is(err, syscall.EPIPE) {
		d.gone = true
		return len(p), nil
	}
	return n, err
}

func hasDiagnosis(r *report, id string) bool {
	if r == nil {
		return false
	}
	for _, d := range r.Diagnoses {
		if d.ID == id {
			return true
		}
	}
	return false
}

// sizeArg writes n as a flag value: "16MiB", "64KiB", or bytes.
func sizeArg(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprint(n)
}
