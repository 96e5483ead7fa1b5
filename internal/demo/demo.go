// Package demo is the README's first command (`make demo`, `ncclrun demo`):
// a fake two-rank NCCL job fails under a default container's memlock limit
// and capabilities, ncclrun explains why, and the same job passes with the
// fix this machine allows. It needs no GPU, no InfiniBand and no root.
//
// It drives the ncclrun binary as a user would (`ncclrun run ... --
// ncclrun fake-nccl ...`), so it shows the real relay and the real
// diagnosis; it is not a test harness for them.
package demo

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/ncclrun/ncclrun/internal/units"
)

// FakePin is what each fake rank pins in the failing run: more than the
// 64 KiB of the container default the demo reproduces and than the 8 MiB
// kernel/systemd default, as NCCL's registrations are.
const FakePin int64 = 16 << 20

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
	// MemlockSoft and MemlockHard are RLIMIT_MEMLOCK in bytes,
	// units.Unlimited (-1) for unlimited.
	MemlockSoft, MemlockHard int64
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
// else the machine's own memlock limit with a pin that fits under it.
func ChooseFix(s State) Fix {
	if s.IPCLockPermitted && !s.UserNamespace {
		return Fix{
			Kind: FixCapability,
			Pin:  FakePin,
			Why:  "ncclrun holds CAP_IPC_LOCK in its permitted set, so the fixed run keeps it and the 64 KiB limit no longer applies",
			Equivalent: []string{
				"docker run --cap-add IPC_LOCK ... (a root container; for --user N use --ulimit memlock=-1:-1)",
				`Kubernetes, root container: securityContext.capabilities.add: ["IPC_LOCK"]; to train as a non-root user, also add SETUID,SETGID and run "ncclrun --user=UID:GID -- ..." (examples/kubernetes/a-root-drop-to-user.yaml)`,
			},
		}
	}
	pin := FakePin
	if s.MemlockHard >= 0 && s.MemlockHard < pin {
		pin = s.MemlockHard / pageSize * pageSize
	}
	why := "ncclrun holds no usable CAP_IPC_LOCK here, so the fixed run uses the memlock limit this machine allows"
	if s.UserNamespace {
		why = "this is a user namespace, where CAP_IPC_LOCK does not lift RLIMIT_MEMLOCK, so the fixed run uses the memlock limit this machine allows"
	}
	if pin <= 0 {
		return Fix{Kind: FixNone, Why: fmt.Sprintf("the hard RLIMIT_MEMLOCK is %s and ncclrun holds no usable CAP_IPC_LOCK: nothing on this machine can pin memory", units.FormatSize(s.MemlockHard))}
	}
	return Fix{
		Kind: FixLimit,
		Pin:  pin,
		Why:  fmt.Sprintf("%s (soft %s, hard %s; ncclrun raises soft to hard), and each rank pins %s", why, units.FormatSize(s.MemlockSoft), units.FormatSize(s.MemlockHard), units.FormatSize(pin)),
		Equivalent: []string{
			"docker run --ulimit memlock=-1:-1 ... (any user)",
			"Kubernetes: LimitMEMLOCK=infinity for containerd/CRI-O on the node (examples/kubernetes/c-node-memlock/)",
			"Slurm: PropagateResourceLimitsExcept=MEMLOCK; bare metal: memlock unlimited in /etc/security/limits.d/",
		},
	}
}

// Run runs the demo with self, the ncclrun binary, narrating on stdout;
// the runs' own output goes to stdout and stderr as ncclrun relays it. It
// returns 0 when the failing run failed with the memlock diagnosis and the
// fixed run passed without one, 1 otherwise.
func Run(self string, stdout, stderr io.Writer) int {
	st, err := probeState()
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
	say := func(format string, a ...any) { fmt.Fprintf(stdout, format+"\n", a...) }

	say("ncclrun demo: NCCL's locked-memory failure, its diagnosis and its fix, with a fake %d-rank NCCL job (no GPU needed).", Ranks)
	say("")
	say("[1/2] A default Docker container or Kubernetes pod: RLIMIT_MEMLOCK 64 KiB and no CAP_IPC_LOCK.")
	say("      Each rank pins %s with mlock(2), checked by the kernel as NCCL's ibv_reg_mr is.", units.FormatSize(FakePin))
	fail := []string{"run", "--memlock", "64KiB", "--drop-cap", "IPC_LOCK"}
	failCode, failRep, err := step(self, dir, "fail", fail, FakePin, stdout, stderr)
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

	fix := ChooseFix(st)
	var fixed []string
	switch fix.Kind {
	case FixCapability:
		say("[2/2] With the fix: keep CAP_IPC_LOCK (still under the 64 KiB limit).")
		fixed = []string{"run", "--memlock", "64KiB"}
	case FixLimit:
		say("[2/2] With the fix: the memlock limit this machine allows instead of 64 KiB; each rank pins %s.", units.FormatSize(fix.Pin))
		if st.MemlockHard >= 0 {
			say("      (Real NCCL needs more than %s: on a node with an RDMA device ncclrun's preflight says so.)", units.FormatSize(st.MemlockHard))
		}
		fixed = []string{"run"}
	default:
		say("[2/2] No fix can be shown here: %s.", fix.Why)
		return 1
	}
	fixCode, fixRep, err := step(self, dir, "fixed", fixed, fix.Pin, stdout, stderr)
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

// step runs `self ARGS --report FILE -- self fake-nccl --ranks 2 --pin
// SIZE`, echoing the command as a user would type it, and returns its exit
// status and report (nil when none was written).
func step(self, dir, name string, args []string, pin int64, stdout, stderr io.Writer) (int, *report, error) {
	fake := []string{"fake-nccl", "--ranks", fmt.Sprint(Ranks), "--pin", sizeArg(pin)}
	fmt.Fprintf(stdout, "$ ncclrun %s -- ncclrun %s\n", strings.Join(args, " "), strings.Join(fake, " "))
	repPath := filepath.Join(dir, name+".json")
	argv := append(append([]string(nil), args...), "--report", repPath, "--")
	argv = append(append(argv, self), fake...)
	cmd := exec.Command(self, argv...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
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
