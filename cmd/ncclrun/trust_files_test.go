package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ncclrun/ncclrun/internal/testutil"
)

const trustWarn = "node-a:1:2 [0] NCCL WARN Call to ibv_reg_mr failed with error Cannot allocate memory"

const torchJSON = `{"message": {"message": "RuntimeError: rank 1 failed", "extraInfo": {"py_callstack": "Traceback", "timestamp": "1700000000"}}}`

// sharedDir is a directory uid 1000 may write, under a world-readable parent.
func sharedDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "ncclrun-trust-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(d) })
	require.NoError(t, os.Chmod(d, 0o777))
	return d
}

// Promise: a TORCHELASTIC_ERROR_FILE the user set is read
// too: its exception is the report's torchrun_error, whatever CMD is (here
// a script, as when torchrun is started by one).
func TestTrustUsersTorchrunErrorFileIsRead(t *testing.T) {
	d := t.TempDir()
	own, report := filepath.Join(d, "own.json"), filepath.Join(d, "report.json")
	r := invocation{env: []string{"TORCHELASTIC_ERROR_FILE=" + own}, args: []string{"--quiet", "--report", report, "--", "sh", "-c",
		`printf '%s' "$1" > "$TORCHELASTIC_ERROR_FILE"; exit 1`, "sh", torchJSON}}.run(t)
	require.Equal(t, 1, r.code, "stderr %q", r.stderr)
	doc := decodeJSON(t, mustRead(t, report))
	assert.Equal(t, "RuntimeError: rank 1 failed", jpath(t, doc, "torchrun_error", "message"))
	assert.Equal(t, torchJSON, mustRead(t, own), "the user's file is left as torchrun wrote it")

	// One left by an earlier run (older than CMD) is not this run's error.
	require.NoError(t, os.Chtimes(own, timeAgo(), timeAgo()))
	r = invocation{env: []string{"TORCHELASTIC_ERROR_FILE=" + own}, args: []string{"--quiet", "--report", report, "--", "sh", "-c", "exit 1"}}.run(t)
	require.Equal(t, 1, r.code)
	assert.NotContains(t, decodeJSON(t, mustRead(t, report)), "torchrun_error")
}

// Promise: the files ncclrun reads after CMD exited
// (NCCL_DEBUG_FILE's, torchrun's error file), which CMD may have replaced,
// are read as CMD's user, only when they are regular files reached without
// a link, within a size bound and a deadline, and CMD's exit status is kept
// whatever they are. Run as root with --user 1000: CMD plants each file.
func TestTrustHostileFilesAfterExit(t *testing.T) {
	testutil.RequireRoot(t)
	const secret = "TOPSECRET-9e1b"
	dir := rootOnly(t, secret) // secret.log: a 0600 root file holding an NCCL WARN line
	shared := sharedDir(t)
	for _, tc := range []struct {
		name  string
		plant string // sh run by CMD (uid 1000) in $D, the shared directory
	}{
		{"symlink to a root-only file", `ln -s "$SECRET" nccl.$H.log; ln -s "$SECRET" err.json`},
		{"symlink to /dev/zero", `ln -s /dev/zero nccl.$H.log; ln -s /dev/zero err.json`},
		{"FIFO", `mkfifo nccl.$H.log err.json`},
		{"huge sparse file", `truncate -s 200G nccl.$H.log err.json`},
		{"directory linked to /dev", `mkdir real; ln -s /dev sub`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := os.MkdirTemp(shared, "case-")
			require.NoError(t, err)
			require.NoError(t, os.Chmod(d, 0o777))
			report := filepath.Join(t.TempDir(), "report.json")
			pattern := filepath.Join(d, "nccl.%h.log")
			errFile := filepath.Join(d, "err.json")
			if strings.Contains(tc.plant, "sub") {
				pattern, errFile = filepath.Join(d, "sub", "zero"), filepath.Join(d, "sub", "zero")
			}
			s := startNcclrun(t, []string{"NCCL_DEBUG_FILE=" + pattern, "TORCHELASTIC_ERROR_FILE=" + errFile, "SECRET=" + filepath.Join(dir, "secret.log"), "D=" + d, "H=" + shortHost(t)},
				0, "--user", "1000", "--report", report, "--", "sh", "-c", `cd "$D" && `+tc.plant+` && exit 3`)
			errOut := recv(t, readAllGuarded(s.stderr), "stderr")
			require.Equal(t, 3, s.wait(t), "CMD's status; stderr %q", errOut)
			rep := mustRead(t, report)
			assert.NotContains(t, string(errOut)+rep, secret)
			doc := decodeJSON(t, rep)
			assert.Empty(t, doc["diagnoses"], "the root-only WARN line was diagnosed")
			assert.NotContains(t, doc, "torchrun_error")
			assert.NotContains(t, string(errOut), "fatal error")
			assert.Contains(t, string(errOut), "not read", "a warning says why")
		})
	}

	// The control: a regular file CMD wrote is read and diagnosed, as CMD's user.
	d, err := os.MkdirTemp(shared, "case-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(d, 0o777))
	report := filepath.Join(t.TempDir(), "report.json")
	r := invocation{env: []string{"NCCL_DEBUG_FILE=" + filepath.Join(d, "nccl.%h.%p.log"), "TORCHELASTIC_ERROR_FILE=" + filepath.Join(d, "err.json"), "D=" + d},
		args: []string{"--quiet", "--user", "1000", "--report", report, "--", "sh", "-c",
			`cd "$D" && echo "$1" > nccl.$(hostname | cut -d. -f1).77.log && printf '%s' "$2" > err.json && exit 3`, "sh", trustWarn, torchJSON}}.run(t)
	require.Equal(t, 3, r.code, "stderr %q", r.stderr)
	rep := decodeJSON(t, mustRead(t, report))
	require.NotEmpty(t, rep["diagnoses"], "the WARN line CMD wrote was not diagnosed")
	assert.Equal(t, "RuntimeError: rank 1 failed", jpath(t, rep, "torchrun_error", "message"))
}

// Promise: --report and --termination-log are written to a
// temporary file renamed into place: a link planted at the path is
// neither followed nor replaced (a warning says so); a directory on the
// way that CMD turned into a link is refused with a warning; the exit
// status stays CMD's.
func TestTrustReportWriteFollowsNoLink(t *testing.T) {
	d := t.TempDir()
	victim := filepath.Join(d, "victim")
	require.NoError(t, os.WriteFile(victim, []byte("precious\n"), 0o644))
	report, termLog := filepath.Join(d, "report.json"), filepath.Join(d, "termlog")
	// CMD plants links at both paths while it runs.
	r := invocation{env: []string{"V=" + victim, "R=" + report, "T=" + termLog}, args: []string{"--quiet", "--report", report, "--termination-log", termLog, "--", "sh", "-c",
		`ln -s "$V" "$R"; ln -s "$V" "$T"; exit 4`}}.run(t)
	require.Equal(t, 4, r.code, "stderr %q", r.stderr)
	assert.Equal(t, "precious\n", mustRead(t, victim))
	for _, p := range []string{report, termLog} {
		dest, err := os.Readlink(p)
		require.NoError(t, err, "%s is still a link", p)
		assert.Equal(t, victim, dest)
	}
	assert.Contains(t, r.stderr, "ncclrun: warning: --report: ")
	assert.Contains(t, r.stderr, "ncclrun: warning: termination log: ")

	// The report's directory replaced by a link while CMD runs.
	out, other := filepath.Join(d, "out"), filepath.Join(d, "elsewhere")
	require.NoError(t, os.Mkdir(out, 0o755))
	require.NoError(t, os.Mkdir(other, 0o755))
	r = invocation{env: []string{"O=" + out, "E=" + other}, args: []string{"--quiet", "--report", filepath.Join(out, "r.json"), "--", "sh", "-c",
		`rmdir "$O" && ln -s "$E" "$O"; exit 5`}}.run(t)
	require.Equal(t, 5, r.code, "stderr %q", r.stderr)
	assert.NoFileExists(t, filepath.Join(other, "r.json"))
	assert.Contains(t, r.stderr, "symbolic link")
	es, err := os.ReadDir(d)
	require.NoError(t, err)
	for _, e := range es {
		assert.False(t, strings.HasPrefix(e.Name(), "."), "a temporary file was left: %s", e.Name())
	}
}

func timeAgo() time.Time { return time.Now().Add(-time.Hour) }

// shortHost is the host name as NCCL's %h writes it: cut at the first dot.
func shortHost(t *testing.T) string {
	h, err := os.Hostname()
	require.NoError(t, err)
	h, _, _ = strings.Cut(h, ".")
	return h
}

// Promise: a termination log that is a bind-mounted file (Kubernetes'
// /dev/termination-log), which no rename can replace (EBUSY), is written
// in place.
func TestTrustTerminationLogOnABindMount(t *testing.T) {
	testutil.RequireRoot(t)
	unshare := testutil.RequireTool(t, "unshare")
	d := t.TempDir()
	src, target := filepath.Join(d, "kubelet-file"), filepath.Join(d, "termination-log")
	require.NoError(t, os.WriteFile(src, nil, 0o666))
	require.NoError(t, os.WriteFile(target, nil, 0o644))
	r := invocation{pre: []string{unshare, "--mount", "--propagation", "private", "sh", "-c", `mount --bind "$0" "$1" && shift && exec "$@"`, src, target, bin},
		args: []string{"--termination-log", target, "--", "sh", "-c", "exit 3"}}.run(t)
	require.Equal(t, 3, r.code, "stderr %q", r.stderr)
	assert.NotContains(t, r.stderr, "warning")
	assert.Contains(t, mustRead(t, src), "status 3", "the message went through the mount")
}
