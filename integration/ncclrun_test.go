//go:build integration

package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// doctorJSON is the part of `ncclrun doctor --json` (docs/contract.md) the suite
// checks.
type doctorJSON struct {
	Environment struct {
		Kind  string   `json:"kind"`
		Clues []string `json:"clues"`
	} `json:"environment"`
	Checks []struct {
		ID      string         `json:"id"`
		Status  string         `json:"status"`
		Summary string         `json:"summary"`
		Fix     string         `json:"fix"`
		Details map[string]any `json:"details"`
	} `json:"checks"`
}

func (d doctorJSON) check(t *testing.T, id string) (status string, details map[string]any) {
	t.Helper()
	for _, c := range d.Checks {
		if c.ID == id {
			return c.Status, c.Details
		}
	}
	t.Fatalf("doctor has no %q check: %+v", id, d.Checks)
	return "", nil
}

// runReport is `run --report FILE` (docs/contract.md).
type runReport struct {
	Preflight doctorJSON `json:"preflight"`
	Diagnoses []struct {
		ID    string `json:"id"`
		Count int    `json:"count"`
		Fix   string `json:"fix"`
	} `json:"diagnoses"`
	ExitCode int     `json:"exit_code"`
	Signal   *string `json:"signal"`
}

// outDir makes a host directory every container user can write, mounted at
// /out for --report files.
func outDir(t *testing.T) (dir string, opt []string) {
	t.Helper()
	dir = t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o1777))
	return dir, []string{"-v", dir + ":/out"}
}

func readReport(t *testing.T, path string) runReport {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err, "ncclrun wrote no report")
	var r runReport
	require.NoError(t, json.Unmarshal(b, &r), "%s", b)
	return r
}

func ncclrunArgs(s scenario, sub string, args ...string) []string {
	out := []string{sub}
	out = append(out, s.NcclrunArgs...)
	return append(out, args...)
}

func opts(s scenario, extra ...[]string) []string {
	o := append([]string{}, s.Opts...)
	for _, e := range extra {
		o = append(o, e...)
	}
	return o
}

// TestNcclrunScenarios runs ncclrun in each scenario of TestRuntimeFacts:
// doctor's verdict, the state CMD really gets under `ncclrun run` (capprobe
// as CMD: uid, CAP_IPC_LOCK, a 16 MiB mlock), and run's diagnosis of the
// NCCL-playing workload.
func TestNcclrunScenarios(t *testing.T) {
	requireNcclrun(t)
	img := scenarioImage(t)
	for _, s := range scenarios {
		t.Run(s.Name, func(t *testing.T) {
			if s.RawLimit == unlimited && !engineCanRaiseLimits() {
				eo, cmd := s.entry("/ncclrun", "doctor", "--json")
				r := runContainer(t, opts(s, eo), img, cmd...)
				assert.Equal(t, 125, r.Code, "this engine cannot set memlock above its own: the container does not start")
				return
			}
			var row ncclRow

			// doctor
			// --min-memlock: the containers have no RDMA device, where
			// doctor would not judge memlock (NCCL uses sockets there).
			eo, cmd := s.entry("/ncclrun", ncclrunArgs(s, "doctor", "--json", "--min-memlock=1GiB")...)
			r := runContainer(t, opts(s, eo), img, cmd...)
			require.Containsf(t, []int{0, 1}, r.Code, "doctor exit status; stderr: %s", r.Stderr)
			var d doctorJSON
			require.NoError(t, json.Unmarshal([]byte(r.Stdout), &d), "doctor --json output: %s\nstderr: %s", r.Stdout, r.Stderr)
			assert.Equal(t, "docker", d.Environment.Kind, "environment kind")
			ml, mlDetails := d.check(t, "memlock")
			caps, capDetails := d.check(t, "capabilities")
			row.Memlock, row.Caps = ml, caps
			assert.Equal(t, s.WantMemlock, ml, "memlock verdict: %v", mlDetails)
			wantFailed := 0
			for _, c := range d.Checks {
				if c.Status == "fail" {
					wantFailed = 1
				}
			}
			assert.Equal(t, wantFailed, r.Code, "doctor exits 1 exactly when a check failed")
			if cmdState, ok := capDetails["command"].(map[string]any); assert.True(t, ok, "capabilities.details.command: %v", capDetails) {
				row.Via, _ = cmdState["via"].(string)
				assert.Equal(t, s.WantVia, cmdState["via"], "command.via")
				assert.Equal(t, float64(s.WantChildUID), cmdState["uid"], "command.uid")
				assert.Equal(t, s.WantChildIPC, cmdState["ipc_lock_effective"], "command.ipc_lock_effective")
			}
			if s.FixMustNot != "" {
				for _, c := range d.Checks {
					if c.ID == "memlock" || c.ID == "capabilities" {
						assert.NotContains(t, c.Fix, s.FixMustNot, "%s fix on %s", c.ID, d.Environment.Kind)
					}
				}
			}
			if s.RawLimit > 0 {
				assert.Equal(t, float64(s.RawLimit), mlDetails["hard"], "memlock.details.hard")
			}

			// what CMD really gets
			eo, cmd = s.entry("/ncclrun", ncclrunArgs(s, "run", "--", "/capprobe", "--mlock", strconv.Itoa(pinBytes))...)
			r = runContainer(t, opts(s, eo), img, cmd...)
			require.Zerof(t, r.Code, "ncclrun run -- capprobe: %s %s", r.Stdout, r.Stderr)
			p := parseProbe(t, r.Stdout)
			row.ChildMlock = p.MlockOK
			assert.Equal(t, s.WantChildUID, p.UID, "CMD's uid")
			assert.Equal(t, s.WantChildIPC, p.IPCLock["CapEff"], "CMD's CAP_IPC_LOCK effective (caps %v)", p.Caps)
			assert.Equal(t, s.WantChildMlock, p.MlockOK, "CMD's mlock of 16 MiB: %s", p.MlockErr)
			assert.Equal(t, ipcLockClaimed(d), p.IPCLock["CapEff"], "doctor's command.ipc_lock_effective is what CMD really gets")

			// run's diagnosis of the NCCL-playing workload
			dir, vo := outDir(t)
			eo, cmd = s.entry("/ncclrun", ncclrunArgs(s, "run", "--report", "/out/r.json", "--", "/ncclrun", "fake-nccl", "--pin", "16MiB")...)
			r = runContainer(t, opts(s, eo, vo), img, cmd...)
			rep := readReport(t, filepath.Join(dir, "r.json"))
			assert.Equal(t, r.Code, rep.ExitCode, "report exit_code is ncclrun's exit status")
			if s.WantDiagnosis == "" {
				assert.Zerof(t, r.Code, "fake-nccl should initialise: %s %s", r.Stdout, r.Stderr)
				assert.Empty(t, rep.Diagnoses)
				// Preflight warnings (Docker's 64 MiB /dev/shm) may print;
				// nothing about memlock or capabilities may.
				assert.NotContains(t, r.Stderr, "ncclrun: memlock", "no memlock complaint in a run that pins")
				assert.NotContains(t, r.Stderr, "ncclrun: capabilities", "no capabilities complaint in a run that pins")
			} else {
				assert.Equal(t, 1, r.Code, "fake-nccl fails as NCCL would: %s", r.Stderr)
				if assert.NotEmpty(t, rep.Diagnoses, "stderr: %s", r.Stderr) {
					row.Diagnosis = rep.Diagnoses[0].ID
					assert.Equal(t, s.WantDiagnosis, rep.Diagnoses[0].ID, "most specific diagnosis first")
				}
				assert.Contains(t, r.Stderr, "ncclrun: ", "the diagnosis is printed on stderr")
			}
			recordNCCL(s.Name, row)
		})
	}
}

func ipcLockClaimed(d doctorJSON) bool {
	for _, c := range d.Checks {
		if c.ID == "capabilities" {
			if cs, ok := c.Details["command"].(map[string]any); ok {
				b, _ := cs["ipc_lock_effective"].(bool)
				return b
			}
		}
	}
	return false
}

// TestShmTooSmall gives the container a 64 MiB /dev/shm (Docker's default
// size, set explicitly) and a workload that needs a 256 MiB NCCL segment:
// doctor's shm check reports the size, and run diagnoses shm. Root with
// IPC_LOCK so pinning is not what fails.
func TestShmTooSmall(t *testing.T) {
	requireNcclrun(t)
	img := scenarioImage(t)
	base := []string{"--shm-size", "64m", "--cap-add", "IPC_LOCK"}

	r := runContainer(t, append(append([]string{}, base...), "--entrypoint", "/ncclrun"), img, "doctor", "--json")
	var d doctorJSON
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &d), "doctor --json: %s %s", r.Stdout, r.Stderr)
	st, det := d.check(t, "shm")
	assert.Equal(t, float64(64<<20), det["size_bytes"], "shm.details.size_bytes")
	t.Logf("doctor shm verdict for 64 MiB: %s", st)

	dir, vo := outDir(t)
	r = runContainer(t, append(append(append([]string{}, base...), vo...), "--entrypoint", "/ncclrun"), img,
		"run", "--report", "/out/r.json", "--", "/ncclrun", "fake-nccl", "--shm", "256MiB")
	rep := readReport(t, filepath.Join(dir, "r.json"))
	assert.Equal(t, 1, r.Code, "fake-nccl fails creating its segment: %s", r.Stderr)
	if assert.NotEmpty(t, rep.Diagnoses, "stderr: %s", r.Stderr) {
		assert.Equal(t, "shm", rep.Diagnoses[0].ID)
	}
	recordShm(st, rep)
}

// startDetached starts a container in the background and returns its id
// once its output has shown the line ready (read from `docker logs -f`, not
// guessed with a sleep).
func startDetached(t *testing.T, opts []string, image string, cmd ...string) string {
	t.Helper()
	args := append([]string{"run", "-d", "--label", labelKey + "=" + runID}, opts...)
	args = append(append(args, image), cmd...)
	id := strings.TrimSpace(mustDocker(t, args...).Stdout)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	logs := exec.CommandContext(ctx, "docker", "logs", "-f", id)
	out, err := logs.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, logs.Start())
	sc := bufio.NewScanner(out)
	ready := false
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "ready" {
			ready = true
			break
		}
	}
	cancel()
	_ = logs.Wait()
	require.True(t, ready, "container %s never printed ready: %s", id, docker(t, "logs", id).Stderr)
	return id
}

// TestPID1StopForwardsTerm: ncclrun as the container's PID 1 forwards
// docker stop's SIGTERM to its child and exits with the child's status,
// which is what docker wait and .State.ExitCode report.
func TestPID1StopForwardsTerm(t *testing.T) {
	requireNcclrun(t)
	img := scenarioImage(t)
	dir, vo := outDir(t)
	id := startDetached(t, append(vo, "--entrypoint", "/ncclrun"), img,
		"run", "--report", "/out/r.json", "--", "/capprobe", "term-exit", "42")
	// -t 120: docker's own SIGKILL must not be what ends the container.
	mustDocker(t, "stop", "-t", "120", id)
	assert.Equal(t, "42", strings.TrimSpace(mustDocker(t, "wait", id).Stdout), "docker wait")
	assert.Equal(t, "42", strings.TrimSpace(mustDocker(t, "inspect", "-f", "{{.State.ExitCode}}", id).Stdout), ".State.ExitCode")
	assert.Contains(t, mustDocker(t, "logs", id).Stdout, "capprobe: got SIGTERM", "the child received the SIGTERM")
	rep := readReport(t, filepath.Join(dir, "r.json"))
	assert.Equal(t, 42, rep.ExitCode)
	assert.Nil(t, rep.Signal)
	mustDocker(t, "rm", "-f", id)
}

// TestPID1KillAfter: a child that ignores SIGTERM is killed by ncclrun after
// --kill-after; ncclrun exits 128+9 and its report says SIGKILL. The report
// exists only if ncclrun itself lived to write it, so docker's own SIGKILL
// (after stop -t 120) would fail this test.
func TestPID1KillAfter(t *testing.T) {
	requireNcclrun(t)
	img := scenarioImage(t)
	dir, vo := outDir(t)
	id := startDetached(t, append(vo, "--entrypoint", "/ncclrun"), img,
		"run", "--kill-after", "1s", "--report", "/out/r.json", "--", "/capprobe", "ignore-term")
	mustDocker(t, "stop", "-t", "120", id)
	assert.Equal(t, "137", strings.TrimSpace(mustDocker(t, "inspect", "-f", "{{.State.ExitCode}}", id).Stdout), ".State.ExitCode")
	rep := readReport(t, filepath.Join(dir, "r.json"))
	assert.Equal(t, 137, rep.ExitCode)
	if assert.NotNil(t, rep.Signal) {
		assert.Equal(t, "SIGKILL", *rep.Signal)
	}
	mustDocker(t, "rm", "-f", id)
}

// TestCmdFileCapability: the kernel clears the ambient set when it
// executes a file that carries a file capability, so a CMD like capprobe-cap
// (cap_ipc_lock+p, not effective) loses the CAP_IPC_LOCK ncclrun hands it.
// run's preflight reads CMD's file capability and must agree with what CMD
// really gets; a CMD without one is the control.
func TestCmdFileCapability(t *testing.T) {
	requireNcclrun(t)
	img := scenarioImage(t)
	nonRoot := []string{"--user", "1000:1000", "--cap-drop", "ALL", "--cap-add", "IPC_LOCK"}
	fromRoot := []string{"--cap-drop", "ALL", "--cap-add", "IPC_LOCK", "--cap-add", "SETUID", "--cap-add", "SETGID"}
	cases := []struct {
		name, entry string
		opts, pre   []string
		cmd, rule   string
		mlock       bool
	}{
		{"uid 1000, cap_ipc_lock+p ncclrun, CMD cap_ipc_lock+p", "/ncclrun-cap", nonRoot, nil, "/capprobe-cap", "cmd-file-cap-lost", false},
		{"--user from root, CMD cap_ipc_lock+p", "/ncclrun", fromRoot, []string{"--user", "1000:1000"}, "/capprobe-cap", "cmd-file-cap-lost", false},
		{"control: CMD without a file capability", "/ncclrun-cap", nonRoot, nil, "/capprobe", "ambient-raise", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir, vo := outDir(t)
			args := append(append([]string{}, tc.pre...), "run", "--min-memlock=1GiB", "--report", "/out/r.json", "--", tc.cmd, "--mlock", strconv.Itoa(pinBytes))
			r := runContainer(t, append(append([]string{"--entrypoint", tc.entry}, tc.opts...), vo...), img, args...)
			require.Zerof(t, r.Code, "ncclrun run -- %s: %s %s", tc.cmd, r.Stdout, r.Stderr)
			p := parseProbe(t, r.Stdout)
			rep := readReport(t, filepath.Join(dir, "r.json"))
			ml, details := rep.Preflight.check(t, "memlock")
			assert.Equal(t, tc.rule, details["rule"], "run's memlock rule: %v", details)
			assert.Equal(t, tc.mlock, ml == "ok", "run's memlock verdict: %v", details)
			assert.Equal(t, tc.mlock, p.MlockOK, "CMD's mlock of 16 MiB: %s", p.MlockErr)
			assert.Equal(t, ipcLockClaimed(rep.Preflight), p.IPCLock["CapEff"], "command.ipc_lock_effective is what CMD really gets (caps %v)", p.Caps)
		})
	}
}
