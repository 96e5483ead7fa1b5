//go:build integration

package integration

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// criScenario is one pod, configured as a kubelet configures it from a
// pod spec, with what the runtime gives its first process (Raw*) and what
// ncclrun must make of it (Want*).
type criScenario struct {
	Name string
	// Memlock is the limit the private containerd runs under (pods
	// inherit it): 64 KiB, or 0 to inherit the test's own (8 MiB here).
	Memlock int64
	Sec     criSecurity
	// Launch is how the binary is started: "exec" (exec-form command),
	// "entrypoint" (the image's ENTRYPOINT, the pod gives args only) or
	// "shell" (`/bin/sh -c "...; exit $?"`).
	Launch string
	// Bin is the variant of ncclrun and capprobe started: "" (no file
	// capability), "-cap" (cap_ipc_lock+p) or "-ep" (cap_ipc_lock+ep).
	Bin         string
	NcclrunArgs []string
	// NoKube leaves out the kubelet's KUBERNETES_* variables and the
	// service-account mount (automountServiceAccountToken: false and a
	// runtime that does not add them): only the cgroup says "pod".
	NoKube bool

	RawIPC     ipc
	RawUID     int
	RawMlock   bool
	RawNoStart string // the container cannot start; crictl's error contains this

	WantMemlock    string
	WantVia        string
	WantChildUID   int
	WantChildIPC   bool
	WantChildMlock bool
	WantDiagnosis  string
}

// The seed's securityContext (examples/kubernetes/b-nonroot-filecap.yaml):
// runAsNonRoot, runAsUser 1000, drop ALL, add IPC_LOCK,
// allowPrivilegeEscalation false.
var seedSec = criSecurity{RunAsUser: i64(1000), RunAsNonRoot: true, Drop: []string{"ALL"}, Add: []string{"IPC_LOCK"}, NoNewPrivs: true}

// way (a): root with only IPC_LOCK, SETUID, SETGID, and ncclrun --user.
func wayASec(nnp bool) criSecurity {
	return criSecurity{RunAsUser: i64(0), Drop: []string{"ALL"}, Add: []string{"IPC_LOCK", "SETUID", "SETGID"}, NoNewPrivs: nnp}
}

func withNNP(s criSecurity, nnp bool) criSecurity { s.NoNewPrivs = nnp; return s }

var criScenarios = []criScenario{
	{
		// The trap: what users write first. IPC_LOCK is in the spec's
		// bounding, effective and permitted sets, and gone after the exec
		// of a binary without a file capability.
		Name: "cri-trap", Memlock: 65536, Sec: seedSec, Launch: "exec",
		RawUID: 1000, RawIPC: ipc{Bnd: true},
		WantMemlock: "fail", WantVia: "none", WantChildUID: 1000, WantDiagnosis: "memlock",
	},
	{
		Name: "cri-trap-8m", Sec: seedSec, Launch: "exec",
		RawUID: 1000, RawIPC: ipc{Bnd: true},
		WantMemlock: "fail", WantVia: "none", WantChildUID: 1000, WantDiagnosis: "memlock",
	},
	{
		// No KUBERNETES_* variables, no
		// service-account mount; the cgroup path still says kubepods.
		Name: "cri-trap-no-kube-env", Memlock: 65536, Sec: seedSec, Launch: "exec", NoKube: true,
		RawUID: 1000, RawIPC: ipc{Bnd: true},
		WantMemlock: "fail", WantVia: "none", WantChildUID: 1000, WantDiagnosis: "memlock",
	},
	{
		Name: "cri-a-root-user-switch", Memlock: 65536, Sec: wayASec(false), Launch: "exec",
		NcclrunArgs: []string{"--user", "1000:1000"},
		RawIPC:      ipc{Eff: true, Prm: true, Bnd: true}, RawMlock: true,
		WantMemlock: "ok", WantVia: "ambient", WantChildUID: 1000, WantChildIPC: true, WantChildMlock: true,
	},
	{
		Name: "cri-a-root-user-switch-nnp", Memlock: 65536, Sec: wayASec(true), Launch: "exec",
		NcclrunArgs: []string{"--user", "1000:1000"},
		RawIPC:      ipc{Eff: true, Prm: true, Bnd: true}, RawMlock: true,
		WantMemlock: "ok", WantVia: "ambient", WantChildUID: 1000, WantChildIPC: true, WantChildMlock: true,
	},
	{
		// The headline: the seed's exact securityContext, unchanged, with
		// the image's cap_ipc_lock+p ncclrun as the exec-form command.
		Name: "cri-b-filecap-exec-nnp", Memlock: 65536, Sec: seedSec, Launch: "exec", Bin: "-cap",
		RawUID: 1000, RawIPC: ipc{Prm: true, Bnd: true},
		WantMemlock: "ok", WantVia: "ambient", WantChildUID: 1000, WantChildIPC: true, WantChildMlock: true,
	},
	{
		Name: "cri-b-filecap-exec-nnp-8m", Sec: seedSec, Launch: "exec", Bin: "-cap",
		RawUID: 1000, RawIPC: ipc{Prm: true, Bnd: true},
		WantMemlock: "ok", WantVia: "ambient", WantChildUID: 1000, WantChildIPC: true, WantChildMlock: true,
	},
	{
		Name: "cri-b-filecap-entrypoint-nnp", Memlock: 65536, Sec: seedSec, Launch: "entrypoint", Bin: "-cap",
		RawUID: 1000, RawIPC: ipc{Prm: true, Bnd: true},
		WantMemlock: "ok", WantVia: "ambient", WantChildUID: 1000, WantChildIPC: true, WantChildMlock: true,
	},
	{
		// Behind a shell, no_new_privs makes the kernel ignore the file
		// capability (lint and doctor: nnp-shell).
		Name: "cri-b-filecap-shell-nnp", Memlock: 65536, Sec: seedSec, Launch: "shell", Bin: "-cap",
		RawUID: 1000, RawIPC: ipc{Bnd: true},
		WantMemlock: "fail", WantVia: "none", WantChildUID: 1000, WantDiagnosis: "memlock",
	},
	{
		Name: "cri-b-filecap-shell", Memlock: 65536, Sec: withNNP(seedSec, false), Launch: "shell", Bin: "-cap",
		RawUID: 1000, RawIPC: ipc{Prm: true, Bnd: true},
		WantMemlock: "ok", WantVia: "ambient", WantChildUID: 1000, WantChildIPC: true, WantChildMlock: true,
	},
	{
		Name: "cri-root-add-ipc-lock", Memlock: 65536, Sec: criSecurity{RunAsUser: i64(0), Add: []string{"IPC_LOCK"}}, Launch: "exec",
		RawIPC: ipc{Eff: true, Prm: true, Bnd: true}, RawMlock: true,
		WantMemlock: "ok", WantVia: "inherited", WantChildIPC: true, WantChildMlock: true,
	},
	{
		Name: "cri-root-default", Memlock: 65536, Sec: criSecurity{RunAsUser: i64(0)}, Launch: "exec",
		WantMemlock: "fail", WantVia: "none", WantDiagnosis: "memlock",
	},
	{
		Name: "cri-user1000-drop-all", Memlock: 65536, Launch: "exec",
		Sec:         criSecurity{RunAsUser: i64(1000), RunAsNonRoot: true, Drop: []string{"ALL"}, NoNewPrivs: true},
		RawUID:      1000,
		WantMemlock: "fail", WantVia: "none", WantChildUID: 1000, WantDiagnosis: "memlock",
	},
	{
		// Example (d)'s securityContext (Pod Security restricted: nothing
		// added) with the image's +p ncclrun: it starts (+p, unlike +ep,
		// does not need IPC_LOCK in the bounding set), and without NRI's
		// per-pod limit memlock fails; the fix names the ulimit-adjuster.
		Name: "cri-d-restricted-filecap", Memlock: 65536, Launch: "exec", Bin: "-cap",
		Sec:         criSecurity{RunAsUser: i64(1000), RunAsNonRoot: true, Drop: []string{"ALL"}, NoNewPrivs: true},
		RawUID:      1000,
		WantMemlock: "fail", WantVia: "none", WantChildUID: 1000, WantDiagnosis: "memlock",
	},
	{
		// +ep: the effective bit makes the capability effective at exec;
		// ncclrun and the probe start with it.
		Name: "cri-user1000-ep-nnp", Memlock: 65536, Sec: seedSec, Launch: "exec", Bin: "-ep",
		RawUID: 1000, RawIPC: ipc{Eff: true, Prm: true, Bnd: true}, RawMlock: true,
		WantMemlock: "ok", WantVia: "ambient", WantChildUID: 1000, WantChildIPC: true, WantChildMlock: true,
	},
	{
		// +ep where IPC_LOCK is not in the bounding set: the kernel refuses
		// the exec, the container never runs. Why docs say +p, never +ep.
		Name: "cri-user1000-ep-drop-all", Memlock: 65536, Launch: "exec", Bin: "-ep",
		Sec:        criSecurity{RunAsUser: i64(1000), RunAsNonRoot: true, Drop: []string{"ALL"}, NoNewPrivs: true},
		RawNoStart: "operation not permitted",
	},
}

// container is the criContainer that starts bin (a path in the image,
// with the scenario's Bin variant) with args, the scenario's way.
func (s criScenario) container(name, bin string, args ...string) criContainer {
	c := criContainer{Name: name, Image: "scenario", Kube: !s.NoKube}
	bin += s.Bin
	switch s.Launch {
	case "entrypoint":
		c.Image = "entrypoint-" + strings.TrimPrefix(bin, "/")
		c.Args = args
	case "shell":
		q := []string{bin}
		for _, a := range args {
			q = append(q, "'"+a+"'")
		}
		c.Command = []string{"/bin/sh", "-c", strings.Join(q, " ") + "; exit $?"}
	default:
		c.Command = append([]string{bin}, args...)
	}
	return c
}

func (s criScenario) ncclrun(sub string, args ...string) []string {
	return append(append([]string{sub}, s.NcclrunArgs...), args...)
}

// TestCRIScenarios runs each scenario as a pod on a private containerd,
// created over the CRI as a kubelet creates it: the raw facts (capprobe as
// the container's process), doctor's verdicts, what CMD really gets under
// `ncclrun run`, and run's diagnosis of the fake NCCL job with the
// termination message the kubelet would show.
func TestCRIScenarios(t *testing.T) {
	requireCRI(t)
	// Two private containerds, stopped when this test ends: one under
	// prlimit --memlock=65536:65536, one inheriting the test's own limit.
	envs := map[int64]*criEnv{}
	for _, s := range criScenarios {
		if envs[s.Memlock] == nil {
			envs[s.Memlock] = startContainerd(t, s.Memlock)
		}
	}
	for _, s := range criScenarios {
		t.Run(s.Name, func(t *testing.T) { criScenarioRun(t, envs[s.Memlock], s) })
	}
	t.Logf("CRI table:\n%s", criTable())
	if !t.Failed() {
		checkDocCRIRows(t)
	}
}

func criScenarioRun(t *testing.T, e *criEnv, s criScenario) {
	pod := e.runPod(t, s.Name, s.Sec)
	wantLimit := s.Memlock
	if wantLimit == 0 {
		wantLimit = selfMemlock()
	}

	// Raw facts: the probe as the container's own process.
	r := pod.run(t, s.container("probe", "/capprobe", "--mlock", strconv.Itoa(pinBytes)))
	if s.RawNoStart != "" {
		// runc reports the failed exec of the container's process either
		// from `crictl start` or, once started, as exit status 1 with
		// runc-init's message as the container's only output.
		why := r.StartErr
		if r.Started {
			assert.NotZero(t, r.ExitCode, "the container's process must not run: %+v", r)
			why = strings.TrimSpace(r.Stderr + r.Stdout)
			recordCRINoStart(s.Name, fmt.Sprintf("exit %d, %s", r.ExitCode, lastLine(why)))
		} else {
			recordCRINoStart(s.Name, "crictl start: "+lastLine(why))
		}
		assert.Contains(t, why, s.RawNoStart)
		assert.NotContains(t, why, `{"uid"`, "capprobe ran")
		return
	}
	require.Zerof(t, r.ExitCode, "capprobe: %+v", r)
	p := parseProbe(t, r.Stdout)
	recordCRIRaw(s.Name, e.Memlock, p)
	assert.Equal(t, wantLimit, p.MemlockSoft, "memlock soft inherited from containerd (%s)", e.Memlock)
	assert.Equal(t, wantLimit, p.MemlockHard, "memlock hard inherited from containerd (%s)", e.Memlock)
	assert.Equal(t, s.RawUID, p.UID, "uid")
	assert.Equal(t, s.RawIPC, ipc{Eff: p.IPCLock["CapEff"], Prm: p.IPCLock["CapPrm"], Bnd: p.IPCLock["CapBnd"], Amb: p.IPCLock["CapAmb"]},
		"CAP_IPC_LOCK in eff/prm/bnd/amb (caps %v)", p.Caps)
	assert.Equal(t, map[bool]int{true: 1}[s.Sec.NoNewPrivs], p.NoNewPrivs, "NoNewPrivs")
	wantMlock := s.RawMlock || wantLimit == unlimited || wantLimit >= pinBytes
	assert.Equal(t, wantMlock, p.MlockOK, "mlock of 16 MiB under %s: %s", fmtLimit(wantLimit), p.MlockErr)

	// doctor
	var row ncclRow
	// --min-memlock (the default, 1 GiB) makes doctor judge memlock as on
	// a node with an HCA: this VM has none, and without one memlock is
	// not judged (skip).
	r = pod.run(t, s.container("doctor", "/ncclrun", s.ncclrun("doctor", "--json", "--min-memlock", "1GiB")...))
	require.True(t, r.Started, "doctor: %+v", r)
	require.Containsf(t, []int{0, 1}, r.ExitCode, "doctor exit status; stderr: %s", r.Stderr)
	var d doctorJSON
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &d), "doctor --json: %s\nstderr: %s", r.Stdout, r.Stderr)
	assert.Equal(t, "kubernetes", d.Environment.Kind, "environment kind (clues %v)", d.Environment.Clues)
	if s.NoKube {
		assert.Contains(t, strings.Join(d.Environment.Clues, "\n"), "kubepods", "the cgroup clue is named")
	}
	ml, mlDetails := d.check(t, "memlock")
	caps, capDetails := d.check(t, "capabilities")
	row.Memlock, row.Caps = ml, caps
	assert.Equal(t, s.WantMemlock, ml, "memlock verdict: %v", mlDetails)
	assert.Equal(t, float64(wantLimit), mlDetails["hard"], "memlock.details.hard")
	if cmdState, ok := capDetails["command"].(map[string]any); assert.True(t, ok, "capabilities.details.command: %v", capDetails) {
		row.Via, _ = cmdState["via"].(string)
		assert.Equal(t, s.WantVia, cmdState["via"], "command.via")
		assert.Equal(t, float64(s.WantChildUID), cmdState["uid"], "command.uid")
		assert.Equal(t, s.WantChildIPC, cmdState["ipc_lock_effective"], "command.ipc_lock_effective")
	}
	for _, c := range d.Checks {
		if c.ID == "memlock" || c.ID == "capabilities" {
			assert.NotContains(t, c.Fix, "Docker ignores", "%s fix in a pod must not give Docker's advice", c.ID)
		}
		if c.ID == "memlock" && c.Status == "fail" {
			assert.Contains(t, c.Fix, "ulimits.noderesource.dev/container.", "a pod's memlock fix names the per-pod NRI limit")
		}
	}

	// What CMD really gets.
	r = pod.run(t, s.container("cmd", "/ncclrun", s.ncclrun("run", "--", "/capprobe", "--mlock", strconv.Itoa(pinBytes))...))
	require.Zerof(t, r.ExitCode, "ncclrun run -- capprobe: %+v", r)
	cp := parseProbe(t, r.Stdout)
	row.ChildMlock = cp.MlockOK
	assert.Equal(t, s.WantChildUID, cp.UID, "CMD's uid")
	assert.Equal(t, s.WantChildIPC, cp.IPCLock["CapEff"], "CMD's CAP_IPC_LOCK effective (caps %v)", cp.Caps)
	assert.Equal(t, s.WantChildMlock, cp.MlockOK, "CMD's mlock of 16 MiB: %s", cp.MlockErr)
	assert.Equal(t, ipcLockClaimed(d), cp.IPCLock["CapEff"], "doctor's command.ipc_lock_effective is what CMD really gets")

	// The fake NCCL job, and its termination message.
	r = pod.run(t, s.container("job", "/ncclrun", s.ncclrun("run", "--", "/ncclrun", "fake-nccl", "--pin", "16MiB")...))
	require.True(t, r.Started, "job: %+v", r)
	if s.WantDiagnosis == "" {
		assert.Zerof(t, r.ExitCode, "fake-nccl should initialise: %s", r.Stderr)
		assert.Empty(t, r.Termination, "a job that succeeds leaves no termination message")
	} else {
		assert.Equal(t, 1, r.ExitCode, "fake-nccl fails as NCCL would: %s", r.Stderr)
		assert.Contains(t, r.Stderr, "ncclrun: ", "the diagnosis is printed on stderr")
		if assert.NotEmpty(t, r.Termination, "the termination message (kubectl describe pod) of a failed job") {
			assert.Contains(t, r.Termination, "("+s.WantDiagnosis, "termination message names the diagnosis")
			assert.LessOrEqual(t, len(r.Termination), 4096, "Kubernetes keeps 4096 bytes of it")
			row.Diagnosis = s.WantDiagnosis
		}
	}
	recordCRINCCL(s.Name, row)
}

// criTermCase is one way for ncclrun in a pod to end non-zero, and what
// the kubelet must then find in the termination message file.
type criTermCase struct {
	Name string
	Sec  criSecurity
	Args []string // after /ncclrun
	Code int
	Want string // in the termination message
}

var criTermCases = []criTermCase{
	{Name: "fake NCCL job, the trap", Sec: seedSec, Args: []string{"run", "--", "/ncclrun", "fake-nccl", "--pin", "16MiB"},
		Code: 1, Want: "(memlock"},
	{Name: "--strict, the trap", Sec: seedSec, Args: []string{"run", "--strict", "--min-memlock", "1GiB", "--", "/ncclrun", "fake-nccl", "--pin", "16MiB"},
		Code: 78, Want: "--strict: preflight failed"},
	{Name: "--user without SETUID/SETGID", Sec: criSecurity{RunAsUser: i64(0), Drop: []string{"ALL"}, Add: []string{"IPC_LOCK"}},
		Args: []string{"run", "--user", "1000:1000", "--", "/capprobe"}, Code: 125, Want: "CAP_SETUID"},
	{Name: "command not found", Sec: seedSec, Args: []string{"run", "--", "/usr/bin/torchrun"}, Code: 127, Want: "/usr/bin/torchrun"},
	{Name: "command not executable", Sec: seedSec, Args: []string{"run", "--", "/etc/passwd"}, Code: 126, Want: "/etc/passwd"},
	{Name: "--misconfig-exit, the trap", Sec: seedSec, Args: []string{"run", "--misconfig-exit", "90", "--", "/ncclrun", "fake-nccl", "--pin", "16MiB"},
		Code: 90, Want: "CMD failed (exit status 1) and memlock is certain"},
	{Name: "CMD fails, no NCCL failure", Sec: seedSec, Args: []string{"run", "--", "/bin/sh", "-c", "exit 3"}, Code: 3,
		Want: "CMD exited with status 3; no NCCL failure found"},
}

// TestCRITerminationMessages: every non-zero exit of ncclrun in a pod
// leaves its message in the file the kubelet mounts at
// /dev/termination-log (no --termination-log given: ncclrun finds it), and
// the container's exit status is ncclrun's.
func TestCRITerminationMessages(t *testing.T) {
	requireCRI(t)
	e := startContainerd(t, 65536)
	for _, tc := range criTermCases {
		t.Run(tc.Name, func(t *testing.T) {
			pod := e.runPod(t, "term", tc.Sec)
			r := pod.run(t, criContainer{Name: "c", Image: "scenario", Command: append([]string{"/ncclrun"}, tc.Args...), Kube: true})
			require.True(t, r.Started, "%+v", r)
			assert.Equal(t, tc.Code, r.ExitCode, "the container's exit status (stderr %q)", r.Stderr)
			assert.Contains(t, r.Termination, tc.Want, "termination message")
			assert.LessOrEqual(t, len(r.Termination), 4096)
			recordCRITerm(tc.Name, r.ExitCode, r.Termination)
		})
	}
	t.Logf("CRI termination messages:\n%s", criTermTable())
}
