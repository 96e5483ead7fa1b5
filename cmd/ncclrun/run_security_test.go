package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ncclrun/ncclrun/internal/testutil"
)

// Privilege tests (docs/reliability.md): a copy of ncclrun with the file
// capability cap_ipc_lock+p, run as uid 1000 the way a container runs a
// non-root training user.

const ipcLockMask = uint64(1) << 14

// asUser1000 is setpriv putting the invoking process in the state of a
// non-root container user: uid/gid 1000, no groups, no inheritable caps.
var asUser1000 = []string{"setpriv", "--reuid", "1000", "--regid", "1000", "--clear-groups", "--inh-caps", "-all"}

// capCopy copies the ncclrun binary into a world-readable directory and
// gives the copy cap_ipc_lock+p.
func capCopy(t *testing.T) string {
	t.Helper()
	testutil.RequireRoot(t)
	testutil.RequireTool(t, "setpriv")
	setcap := testutil.RequireTool(t, "setcap")
	dir, err := os.MkdirTemp("", "ncclrun-security-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	p := filepath.Join(dir, "ncclrun")
	data, err := os.ReadFile(bin)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(p, data, 0o755))
	if out, err := exec.Command(setcap, "cap_ipc_lock+p", p).CombinedOutput(); err != nil {
		testutil.SkipOrFail(t, "setcap on %s: %v: %s", p, err, out)
	}
	return p
}

// capsOf parses Cap* lines of a /proc/PID/status dump.
func capsOf(t *testing.T, status string) map[string]uint64 {
	t.Helper()
	m := map[string]uint64{}
	for _, l := range strings.Split(status, "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok || !strings.HasPrefix(k, "Cap") {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		require.NoError(t, err, "line %q", l)
		m[k] = n
	}
	return m
}

// Promise: a setcap'd ncclrun gives CMD CAP_IPC_LOCK and nothing else, in
// every set, and holds nothing else itself.
func TestSecurityFileCapGivesOnlyIPCLock(t *testing.T) {
	capBin := capCopy(t)
	r := invocation{pre: asUser1000, path: capBin, args: []string{"--quiet", "--", "sh", "-c",
		`echo CHILD; grep ^Cap /proc/self/status; echo PARENT; grep ^Cap /proc/$PPID/status; id -u`}}.run(t)
	require.Equal(t, 0, r.code, "stderr %q", r.stderr)
	child, parent, ok := strings.Cut(strings.TrimPrefix(r.stdout, "CHILD\n"), "PARENT\n")
	require.True(t, ok, "stdout %q", r.stdout)
	c := capsOf(t, child)
	for _, set := range []string{"CapEff", "CapPrm", "CapInh", "CapAmb"} {
		require.Equal(t, ipcLockMask, c[set], "child %s: CAP_IPC_LOCK only (%q)", set, child)
	}
	p := capsOf(t, parent)
	for _, set := range []string{"CapEff", "CapPrm", "CapInh", "CapAmb"} {
		require.Zero(t, p[set]&^ipcLockMask, "ncclrun's %s holds more than CAP_IPC_LOCK (%q)", set, parent)
	}
	require.True(t, strings.HasSuffix(r.stdout, "\n1000\n"), "CMD runs as the invoking user: %q", r.stdout)
}

// rootOnly makes a directory only root can enter, holding a 0600 file and
// a tree for --root whose files are 0600; returns the dir.
func rootOnly(t *testing.T, secret string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "ncclrun-rootonly-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755)) // uid 1000 may look, not write
	tree := fakeTree(t, 4242, "65536", "65536", "0000000000000000")
	files := map[string]string{
		"secret.log":            "node-a:1:1 [0] NCCL WARN Call to ibv_reg_mr failed with error Cannot allocate memory " + secret + "\n",
		"root/proc/self/status": mustRead(t, filepath.Join(tree, "proc/self/status")) + "X-Secret:\t" + secret + "\n",
		"root/proc/self/limits": mustRead(t, filepath.Join(tree, "proc/self/limits")),
		"root/etc/nccl.conf":    "NCCL_SOCKET_IFNAME=" + secret + "\n",
		"existing-report.json":  "root's report\n",
		"existing-termlog":      "root's log\n",
	}
	for p, c := range files {
		full := filepath.Join(dir, p)
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(c), 0o600))
	}
	for _, p := range []string{"existing-report.json", "existing-termlog"} {
		require.NoError(t, os.Chmod(filepath.Join(dir, p), 0o644)) // readable, not writable by uid 1000
	}
	return dir
}

// Promise: --root, explain, --report and --termination-log give a setcap'd
// ncclrun run by uid 1000 no access the user lacks: it holds no DAC
// capability and opens every file as the user.
func TestSecurityNoFileAccessThroughFlags(t *testing.T) {
	capBin := capCopy(t)
	const secret = "TOPSECRET-4c1d"
	dir := rootOnly(t, secret)

	// --root on a tree of 0600 root files: nothing of it is read.
	r := invocation{pre: asUser1000, path: capBin, args: []string{"doctor", "--json", "--root", filepath.Join(dir, "root")}}.run(t)
	require.NotContains(t, r.stdout+r.stderr, secret)
	require.NotContains(t, r.stdout, `"uid": 4242`, "the 0600 status file was read")
	r = invocation{pre: asUser1000, path: capBin, args: []string{"env", "--format", "json", "--root", filepath.Join(dir, "root")}}.run(t)
	require.NotContains(t, r.stdout+r.stderr, secret)

	// explain of a 0600 file: refused as for the user.
	r = invocation{pre: asUser1000, path: capBin, args: []string{"explain", filepath.Join(dir, "secret.log")}}.run(t)
	require.Equal(t, ExitUsage, r.code, "stderr %q", r.stderr)
	require.Contains(t, r.stderr, "permission denied")
	require.NotContains(t, r.stdout+r.stderr, secret)

	// --report / --termination-log: no new file in root's directory, no
	// overwrite of root's files; a warning, and the child's status.
	for _, target := range []string{"new-report.json", "existing-report.json", "existing-termlog"} {
		p := filepath.Join(dir, target)
		before, _ := os.ReadFile(p)
		r = invocation{pre: asUser1000, path: capBin, args: []string{"--report", p, "--termination-log", p, "--", "sh", "-c", "exit 5"}}.run(t)
		require.Equal(t, 5, r.code, "stderr %q", r.stderr)
		require.Contains(t, r.stderr, "permission denied")
		after, _ := os.ReadFile(p)
		require.Equal(t, string(before), string(after), "%s changed", target)
	}
	require.NoFileExists(t, filepath.Join(dir, "new-report.json"))
}

// Promise (and why the above holds): CAP_IPC_LOCK grants no file access.
// CMD, holding CAP_IPC_LOCK in every set, cannot read a 0600 root file.
func TestSecurityIPCLockGrantsNoFileAccess(t *testing.T) {
	capBin := capCopy(t)
	const secret = "TOPSECRET-77aa"
	dir := rootOnly(t, secret)
	r := invocation{pre: asUser1000, path: capBin, args: []string{"--quiet", "--", "sh", "-c",
		`grep ^CapEff /proc/self/status; cat "$1" || exit 42`, "sh", filepath.Join(dir, "secret.log")}}.run(t)
	require.Equal(t, 42, r.code, "stdout %q stderr %q", r.stdout, r.stderr)
	require.Equal(t, ipcLockMask, capsOf(t, r.stdout)["CapEff"], "CMD did hold CAP_IPC_LOCK")
	require.Contains(t, r.stderr, "Permission denied")
	require.NotContains(t, r.stdout+r.stderr, secret)
}

// Promise: a forged NCCLRUN_TRAMPOLINE (the variable ncclrun uses to
// re-execute itself) gives a setcap'd ncclrun's user nothing more: not
// another uid, not a higher memlock hard limit, no capability but
// CAP_IPC_LOCK.
func TestSecurityForgedTrampolineGivesNothing(t *testing.T) {
	capBin := capCopy(t)
	for name, spec := range map[string]string{
		"become root":   `{"path":"/bin/sh","argv":["sh","-c","id -u"],"user":{"UID":0,"GID":0,"Groups":[]}}`,
		"raise memlock": `{"path":"/bin/sh","argv":["sh","-c","ulimit -H -l"],"memlock":[-1,-1]}`,
	} {
		t.Run(name, func(t *testing.T) {
			r := invocation{pre: append(append([]string{}, asUser1000...), "prlimit", "--memlock=65536:65536"), path: capBin,
				env: []string{"NCCLRUN_TRAMPOLINE=" + spec}}.run(t)
			require.NotEqual(t, 0, r.code, "stdout %q", r.stdout)
			require.NotContains(t, r.stdout, "unlimited")
			require.NotEqual(t, "0\n", r.stdout)
		})
	}
	r := invocation{pre: asUser1000, path: capBin, env: []string{`NCCLRUN_TRAMPOLINE={"path":"/bin/sh","argv":["sh","-c","grep ^Cap /proc/self/status"],"ambient":true}`}}.run(t)
	require.Equal(t, 0, r.code, "stderr %q", r.stderr)
	for set, v := range capsOf(t, r.stdout) {
		if set != "CapBnd" {
			require.Zero(t, v&^ipcLockMask, "%s: %q", set, r.stdout)
		}
	}
}

// Promise: the report, the termination log and ncclrun's own messages
// carry only NCCL-related variables: secrets in the environment never
// appear there.
func TestSecuritySecretsNeverReported(t *testing.T) {
	secrets := []string{"tok-9f8e7d6c5b4a", "AKIAwJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY", "hunter2-db-password"}
	env := []string{"SECRET_TOKEN=" + secrets[0], "AWS_SECRET_ACCESS_KEY=" + secrets[1], "DATABASE_URL=postgres://u:" + secrets[2] + "@db/x",
		"NCCL_IB_HCA=mlx5_0", "KUBERNETES_SERVICE_HOST=10.0.0.1"}
	dir := t.TempDir()
	report, termLog := filepath.Join(dir, "report.json"), filepath.Join(dir, "termination-log")
	script := `echo "node-a:1:2 [0] NCCL WARN Call to ibv_reg_mr failed with error Cannot allocate memory"; exit 1`
	r := invocation{env: env, args: []string{"--report", report, "--termination-log", termLog, "--", "sh", "-c", script}}.run(t)
	require.Equal(t, 1, r.code, "stderr %q", r.stderr)
	outputs := map[string]string{"report": mustRead(t, report), "termination log": mustRead(t, termLog), "stderr": r.stderr}
	require.Contains(t, outputs["report"], "NCCL_DEBUG", "the report does carry NCCL variables")
	for _, args := range [][]string{{"doctor", "--json"}, {"doctor"}, {"env", "--format", "json"}, {"env"}} {
		d := invocation{env: env, args: args}.run(t)
		outputs[strings.Join(args, " ")] = d.stdout + d.stderr
	}
	for what, text := range outputs {
		for _, s := range secrets {
			require.NotContains(t, text, s, "%s leaks a secret", what)
		}
		require.NotContains(t, text, "SECRET_TOKEN", what)
		require.NotContains(t, text, "AWS_SECRET_ACCESS_KEY", what)
	}
}
