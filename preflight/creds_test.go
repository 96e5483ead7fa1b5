package preflight

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ncclrun/ncclrun/internal/pinrule"
	"github.com/ncclrun/ncclrun/internal/testutil"
)

// helperBinary copies the test binary to a directory that uid 1000 can
// traverse and execute (go test builds under a 0700 directory).
func helperBinary(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	dir, err := os.MkdirTemp("", "preflight-helper-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	src, err := os.Open(exe)
	require.NoError(t, err)
	defer src.Close()
	dst := filepath.Join(dir, "preflight.test")
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, 0o755)
	require.NoError(t, err)
	_, err = io.Copy(out, src)
	require.NoError(t, err)
	require.NoError(t, out.Close())
	return dst
}

// TestRealCredentialStates puts a re-executed helper into the credential
// states Docker and Kubernetes produce (prlimit + setpriv) and checks what
// preflight.Run reports from inside, including a real mlock(2) probe.
func TestRealCredentialStates(t *testing.T) {
	testutil.RequireRoot(t)
	prlimit := testutil.RequireTool(t, "prlimit")
	setpriv := testutil.RequireTool(t, "setpriv")
	testutil.RequireCap(t, capIPCLock)
	testutil.RequireCap(t, capSetuid)
	bin := helperBinary(t)
	const probe = 1 << 20 // 1 MiB: over a 64 KiB limit, nothing with CAP_IPC_LOCK

	type want struct {
		memlock    Status
		rule       string
		via        string
		uid        int
		ipcLock    CapSets
		nnp        bool
		probeOK    bool
		cmdUID     int
		ambient    bool
		capsStatus Status
		userns     bool
	}
	cases := []struct {
		name    string
		setpriv []string
		unshare bool // run under unshare -U -r (a user namespace) instead of setpriv
		fileCap bool // run a copy of the helper carrying cap_ipc_lock+p
		shell   bool // start the helper from sh, not directly from setpriv
		user    string
		// exec: CMD's executable carries this file capability ("" none);
		// script: CMD is a #! script whose interpreter carries it.
		exec   string
		script bool
		want   want
	}{{
		name:    "docker default root: IPC_LOCK not in the bounding set",
		setpriv: []string{"--bounding-set", "-ipc_lock,-sys_resource", "--inh-caps=-all"},
		want: want{memlock: Fail, rule: ruleRootNoIPCLock, via: "none", uid: 0, cmdUID: 0,
			ipcLock: CapSets{}, probeOK: false, capsStatus: Warn},
	}, {
		name:    "root with IPC_LOCK",
		setpriv: []string{"--bounding-set", "-sys_resource", "--inh-caps=-all"},
		want: want{memlock: OK, rule: ruleRootIPCLock, via: "inherited", uid: 0, cmdUID: 0,
			ipcLock: CapSets{Effective: true, Permitted: true, Bounding: true}, probeOK: true, capsStatus: OK},
	}, {
		name:    "root with IPC_LOCK starting CMD as uid 1000 (--user)",
		setpriv: []string{"--bounding-set", "-sys_resource", "--inh-caps=-all"},
		user:    "1000:1000",
		want: want{memlock: OK, rule: ruleAmbient, via: "ambient", uid: 0, cmdUID: 1000, ambient: true,
			ipcLock: CapSets{Effective: true, Permitted: true, Bounding: true}, probeOK: true, capsStatus: OK},
	}, {
		name:    "root with IPC_LOCK but without SETUID/SETGID for --user",
		setpriv: []string{"--bounding-set", "-sys_resource,-setuid,-setgid", "--inh-caps=-all"},
		user:    "1000:1000",
		want: want{memlock: Fail, rule: ruleNoSetid, via: "none", uid: 0, cmdUID: 1000,
			ipcLock: CapSets{Effective: true, Permitted: true, Bounding: true}, probeOK: true, capsStatus: Fail},
	}, {
		name:    "kubernetes trap: uid 1000, IPC_LOCK only in the bounding set",
		setpriv: []string{"--reuid", "1000", "--regid", "1000", "--clear-groups", "--inh-caps=-all", "--bounding-set", "-all,+ipc_lock"},
		want: want{memlock: Fail, rule: ruleK8sTrap, via: "none", uid: 1000, cmdUID: 1000,
			ipcLock: CapSets{Bounding: true}, probeOK: false, capsStatus: Warn},
	}, {
		// Nothing added, IPC_LOCK not even in the bounding
		// set: memlock fails as in the trap, and capabilities warns as in it.
		name:    "uid 1000, drop ALL, nothing added",
		setpriv: []string{"--reuid", "1000", "--regid", "1000", "--clear-groups", "--inh-caps=-all", "--bounding-set", "-all"},
		want: want{memlock: Fail, rule: ruleNoIPCLock, via: "none", uid: 1000, cmdUID: 1000,
			ipcLock: CapSets{}, probeOK: false, capsStatus: Warn},
	}, {
		name:    "uid 1000 with IPC_LOCK inheritable and ambient",
		setpriv: []string{"--reuid", "1000", "--regid", "1000", "--clear-groups", "--inh-caps=-all,+ipc_lock", "--ambient-caps", "+ipc_lock"},
		want: want{memlock: OK, rule: ruleInherited, via: "inherited", uid: 1000, cmdUID: 1000,
			ipcLock: CapSets{Effective: true, Permitted: true, Inheritable: true, Bounding: true, Ambient: true}, probeOK: true, capsStatus: OK},
	}, {
		name:    "uid 1000 with no_new_privs",
		setpriv: []string{"--reuid", "1000", "--regid", "1000", "--clear-groups", "--inh-caps=-all", "--bounding-set", "-all,+ipc_lock", "--no-new-privs"},
		want: want{memlock: Fail, rule: ruleK8sTrap, via: "none", uid: 1000, cmdUID: 1000, nnp: true,
			ipcLock: CapSets{Bounding: true}, probeOK: false, capsStatus: Warn},
	}, {
		name:    "uid 1000 with cap_ipc_lock+p on the binary (row 7)",
		setpriv: []string{"--reuid", "1000", "--regid", "1000", "--clear-groups", "--inh-caps=-all", "--bounding-set", "-all,+ipc_lock"},
		fileCap: true,
		want: want{memlock: OK, rule: ruleAmbient, via: "ambient", uid: 1000, cmdUID: 1000, ambient: true,
			ipcLock: CapSets{Permitted: true, Bounding: true}, probeOK: true, capsStatus: OK},
	}, {
		// setpriv execs holding IPC_LOCK in its permitted set, as runc-init
		// does for a Kubernetes pod, so no_new_privs lets the file
		// capability through; a shell in between holds nothing (row 7b).
		name:    "uid 1000 with cap_ipc_lock+p under no_new_privs, exec'd directly",
		setpriv: []string{"--reuid", "1000", "--regid", "1000", "--clear-groups", "--inh-caps=-all", "--bounding-set", "-all,+ipc_lock", "--no-new-privs"},
		fileCap: true,
		want: want{memlock: OK, rule: ruleAmbient, via: "ambient", uid: 1000, cmdUID: 1000, ambient: true, nnp: true,
			ipcLock: CapSets{Permitted: true, Bounding: true}, probeOK: true, capsStatus: OK},
	}, {
		name:    "uid 1000 with cap_ipc_lock+p under no_new_privs behind a shell (row 7b)",
		setpriv: []string{"--reuid", "1000", "--regid", "1000", "--clear-groups", "--inh-caps=-all", "--bounding-set", "-all,+ipc_lock", "--no-new-privs"},
		fileCap: true, shell: true,
		want: want{memlock: Fail, rule: ruleNNPFileCap, via: "none", uid: 1000, cmdUID: 1000, nnp: true,
			ipcLock: CapSets{Bounding: true}, probeOK: false, capsStatus: Warn},
	}, {
		// The file capability is granted only within the bounding set.
		name:    "uid 1000 with cap_ipc_lock+p on the binary, IPC_LOCK not in the bounding set",
		setpriv: []string{"--reuid", "1000", "--regid", "1000", "--clear-groups", "--inh-caps=-all", "--bounding-set", "-all"},
		fileCap: true,
		want: want{memlock: Fail, rule: ruleNoIPCLock, via: "none", uid: 1000, cmdUID: 1000,
			ipcLock: CapSets{}, probeOK: false, capsStatus: Warn},
	}, {
		// The kernel clears the ambient set when it executes a file with
		// a file capability: CMD loses what ncclrun hands it.
		name:    "uid 1000 with cap_ipc_lock+p, CMD carries cap_ipc_lock+p",
		setpriv: []string{"--reuid", "1000", "--regid", "1000", "--clear-groups", "--inh-caps=-all", "--bounding-set", "-all,+ipc_lock"},
		fileCap: true, exec: "cap_ipc_lock+p",
		want: want{memlock: Fail, rule: pinrule.RuleCmdCapLost, via: "none", uid: 1000, cmdUID: 1000, ambient: true,
			ipcLock: CapSets{Permitted: true, Bounding: true}, probeOK: true, capsStatus: Warn},
	}, {
		name:    "root starting CMD as uid 1000 (--user), CMD's #! interpreter carries cap_net_raw+ep",
		setpriv: []string{"--bounding-set", "-sys_resource", "--inh-caps=-all"},
		user:    "1000:1000", exec: "cap_net_raw+ep", script: true,
		want: want{memlock: Fail, rule: pinrule.RuleCmdCapLost, via: "none", uid: 0, cmdUID: 1000, ambient: true,
			ipcLock: CapSets{Effective: true, Permitted: true, Bounding: true}, probeOK: true, capsStatus: Warn},
	}, {
		name:    "uid 1000 with cap_ipc_lock+p, CMD carries cap_ipc_lock+ep",
		setpriv: []string{"--reuid", "1000", "--regid", "1000", "--clear-groups", "--inh-caps=-all", "--bounding-set", "-all,+ipc_lock"},
		fileCap: true, exec: "cap_ipc_lock+ep",
		want: want{memlock: OK, rule: pinrule.RuleCmdFileCap, via: "file", uid: 1000, cmdUID: 1000, ambient: true,
			ipcLock: CapSets{Permitted: true, Bounding: true}, probeOK: true, capsStatus: OK},
	}, {
		// SECBIT_NOROOT: the helper, root, gained nothing at its exec, and
		// a root CMD would gain nothing either.
		name:    "root under SECBIT_NOROOT",
		setpriv: []string{"--bounding-set", "-sys_resource", "--inh-caps=-all", "--securebits", "+noroot"},
		want: want{memlock: Fail, rule: ruleNoIPCLock, via: "none", uid: 0, cmdUID: 0,
			ipcLock: CapSets{Bounding: true}, probeOK: false, capsStatus: Warn},
	}, {
		name:    "root under SECBIT_NOROOT with IPC_LOCK ambient",
		setpriv: []string{"--bounding-set", "-sys_resource", "--inh-caps=-all,+ipc_lock", "--ambient-caps", "+ipc_lock", "--securebits", "+noroot"},
		want: want{memlock: OK, rule: ruleInherited, via: "inherited", uid: 0, cmdUID: 0,
			ipcLock: CapSets{Effective: true, Permitted: true, Inheritable: true, Bounding: true, Ambient: true}, probeOK: true, capsStatus: OK},
	}, {
		name:    "user namespace: root with every capability, in the namespace only",
		unshare: true,
		want: want{memlock: Fail, rule: ruleUserNS, via: "none", uid: 0, cmdUID: 0, userns: true,
			ipcLock: CapSets{Effective: true, Permitted: true, Bounding: true}, probeOK: false, capsStatus: Warn},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--memlock=65536:65536", setpriv}, tc.setpriv...)
			if tc.unshare {
				args = []string{"--memlock=65536:65536", testutil.RequireTool(t, "unshare"), "--user", "--map-root-user"}
			}
			exe := bin
			if tc.fileCap {
				exe = filepath.Join(filepath.Dir(bin), "preflight-cap.test")
				data, err := os.ReadFile(bin)
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(exe, data, 0o755))
				out, err := exec.Command(testutil.RequireTool(t, "setcap"), "cap_ipc_lock+p", exe).CombinedOutput()
				require.NoError(t, err, "setcap: %s", out)
			}
			var cmdExec string
			if tc.exec != "" {
				cmdExec = filepath.Join(filepath.Dir(bin), "cmd-"+strings.NewReplacer("+", "-", ",", "-").Replace(tc.exec))
				require.NoError(t, os.WriteFile(cmdExec, []byte("\x7fELF"), 0o755))
				out, err := exec.Command(testutil.RequireTool(t, "setcap"), tc.exec, cmdExec).CombinedOutput()
				require.NoError(t, err, "setcap: %s", out)
				if tc.script {
					script := cmdExec + ".sh"
					require.NoError(t, os.WriteFile(script, []byte("#!"+cmdExec+"\n"), 0o755))
					cmdExec = script
				}
			}
			if tc.shell {
				args = append(args, "--", testutil.RequireTool(t, "sh"), "-c", `exec "$0" -test.run='^$'`, exe)
			} else {
				args = append(args, "--", exe, "-test.run=^$")
			}
			cmd := exec.Command(prlimit, args...)
			cmd.Env = []string{helperEnv + "=report", "PREFLIGHT_TEST_PROBE=" + strconv.Itoa(probe), "PREFLIGHT_TEST_USER=" + tc.user, "PREFLIGHT_TEST_EXEC=" + cmdExec, "PATH=/usr/bin:/bin"}
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			require.NoError(t, cmd.Run(), "stderr: %s", stderr.String())
			var out helperOutput
			require.NoError(t, json.Unmarshal(stdout.Bytes(), &out), stdout.String())

			mem, ok := out.Report.Check(IDMemlock)
			require.True(t, ok)
			caps, ok := out.Report.Check(IDCapabilities)
			require.True(t, ok)
			assert.Equal(t, tc.want.memlock, mem.Status, mem.Summary)
			assert.Equal(t, tc.want.rule, mem.Details["rule"])
			assert.EqualValues(t, 65536, mem.Details["soft"])
			assert.EqualValues(t, 65536, mem.Details["hard"])
			assert.EqualValues(t, probe, mem.Details["probe_bytes"])
			assert.Equal(t, tc.want.probeOK, mem.Details["probe_ok"], "probe_error: %v", mem.Details["probe_error"])

			assert.Equal(t, tc.want.capsStatus, caps.Status, caps.Summary)
			assert.EqualValues(t, tc.want.uid, caps.Details["uid"])
			assert.Equal(t, tc.want.nnp, caps.Details["no_new_privs"])
			assert.Equal(t, tc.want.userns, caps.Details["user_namespace"])
			ipc := caps.Details["ipc_lock"].(map[string]any)
			assert.Equal(t, map[string]any{
				"effective": tc.want.ipcLock.Effective, "permitted": tc.want.ipcLock.Permitted,
				"inheritable": tc.want.ipcLock.Inheritable, "bounding": tc.want.ipcLock.Bounding,
				"ambient": tc.want.ipcLock.Ambient,
			}, ipc)
			sr := caps.Details["sys_resource"].(map[string]any)
			// Dropped by setpriv; a user namespace has every capability (in it).
			assert.Equal(t, tc.want.userns, sr["effective"])
			cmdState := caps.Details["command"].(map[string]any)
			assert.Equal(t, tc.want.via, cmdState["via"])
			assert.EqualValues(t, tc.want.cmdUID, cmdState["uid"])
			assert.Equal(t, tc.want.via != "none", cmdState["ipc_lock_effective"])
			assert.Equal(t, tc.want.ambient, out.Ambient)
			if tc.want.rule == ruleNoIPCLock && tc.fileCap {
				// ncclrun already carries the capability: the fix is
				// the bounding set, not another setcap.
				assert.Contains(t, mem.Summary, "carries cap_ipc_lock+p")
				assert.True(t, strings.HasPrefix(mem.Fix, "add IPC_LOCK to the container's capabilities"), mem.Fix)
			}
			if tc.want.rule == ruleNNPFileCap && out.Report.Environment.Kind != "docker" {
				// The file capability is already there;
				// the fix is the way ncclrun is started, not another setcap.
				assert.NotContains(t, mem.Fix, "setcap")
				assert.Contains(t, mem.Fix, "exec form")
				assert.Contains(t, mem.Summary, "already carries cap_ipc_lock+p")
			}
			if tc.want.rule == ruleNNPFileCap && out.Report.Environment.Kind == "docker" {
				// Docker keeps a non-root user's added capabilities in the
				// bounding set only: exec form does not help there.
				assert.Contains(t, mem.Fix, "bounding set only")
				assert.NotContains(t, mem.Fix, "exec form")
			}
		})
	}
}

// TestRealCredentialsWithoutRDMA: memlock not judged without RDMA, in
// real credential states. On a node without any RDMA device, with no --probe and no
// --min-memlock, the trap and a user without any capability fail nothing:
// memlock is skip with the reason, capabilities ok.
func TestRealCredentialsWithoutRDMA(t *testing.T) {
	testutil.RequireRoot(t)
	prlimit := testutil.RequireTool(t, "prlimit")
	setpriv := testutil.RequireTool(t, "setpriv")
	if ents, _ := os.ReadDir("/sys/class/infiniband"); len(ents) > 0 {
		t.Skip("this node has RDMA devices: memlock is judged here")
	}
	bin := helperBinary(t)
	for _, tc := range []struct {
		name, rule string
		setpriv    []string
	}{
		{"kubernetes trap", ruleK8sTrap, []string{"--reuid", "1000", "--regid", "1000", "--clear-groups", "--inh-caps=-all", "--bounding-set", "-all,+ipc_lock"}},
		{"uid 1000 without any capability", ruleNoIPCLock, []string{"--reuid", "1000", "--regid", "1000", "--clear-groups", "--inh-caps=-all", "--bounding-set", "-all"}},
		{"docker default root", ruleRootNoIPCLock, []string{"--bounding-set", "-ipc_lock,-sys_resource", "--inh-caps=-all"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append(append([]string{"--memlock=65536:65536", setpriv}, tc.setpriv...), "--", bin, "-test.run=^$")
			cmd := exec.Command(prlimit, args...)
			cmd.Env = []string{helperEnv + "=report", "PATH=/usr/bin:/bin"}
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			require.NoError(t, cmd.Run(), "stderr: %s", stderr.String())
			var out helperOutput
			require.NoError(t, json.Unmarshal(stdout.Bytes(), &out), stdout.String())
			mem, _ := out.Report.Check(IDMemlock)
			caps, _ := out.Report.Check(IDCapabilities)
			assert.Equal(t, Skip, mem.Status, mem.Summary)
			assert.Equal(t, tc.rule, mem.Details["rule"])
			assert.Contains(t, mem.Summary, "no RDMA device")
			assert.Equal(t, OK, caps.Status, caps.Summary)
			assert.False(t, out.Report.Failed())
		})
	}
}

// TestNoAmbientRaiseLive: root starting CMD as uid 1000 hands it
// CAP_IPC_LOCK as ambient, unless SECBIT_NO_CAP_AMBIENT_RAISE forbids the
// raise (the launcher's start would fail with EPERM): then preflight must
// not ask for it, and memlock names the securebit.
func TestNoAmbientRaiseLive(t *testing.T) {
	testutil.RequireRoot(t) // PR_SET_SECUREBITS needs CAP_SETPCAP
	self, err := os.Executable()
	require.NoError(t, err)
	for _, tc := range []struct {
		bits    int
		rule    string
		ambient bool
	}{
		{0, ruleAmbient, true},
		{1 << 6, ruleNoIPCLock, false},
	} {
		t.Run(strconv.Itoa(tc.bits), func(t *testing.T) {
			cmd := exec.Command(self, "-test.run=^$")
			cmd.Env = []string{helperEnv + "=securebits", "PREFLIGHT_TEST_SECUREBITS=" + strconv.Itoa(tc.bits), "PREFLIGHT_TEST_USER=1000:1000", "PATH=/usr/bin:/bin"}
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			require.NoError(t, cmd.Run(), "stderr: %s", stderr.String())
			var out helperOutput
			require.NoError(t, json.Unmarshal(stdout.Bytes(), &out), stdout.String())
			mem, ok := out.Report.Check(IDMemlock)
			require.True(t, ok)
			capc, ok := out.Report.Check(IDCapabilities)
			require.True(t, ok)
			assert.Equal(t, tc.rule, mem.Details["rule"], mem.Summary)
			assert.Equal(t, tc.ambient, out.Ambient)
			if tc.bits != 0 {
				assert.Contains(t, mem.Summary, "SECBIT_NO_CAP_AMBIENT_RAISE is set")
				assert.Equal(t, true, capc.Details["secbit_no_cap_ambient_raise"])
			}
		})
	}
}
