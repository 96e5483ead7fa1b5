package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ncclrun/ncclrun/internal/testutil"
)

// Values the test binary is linked with, as the Makefile does (with its
// default GODEBUG).
const (
	testVersion = "9.8.7-test"
	testCommit  = "c0ffee"
)

// binDir holds the ncclrun binary built once by TestMain; it is world
// readable so that tests can run it as uid 1000.
var (
	binDir string
	bin    string
)

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "ncclrun-cmd-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	binDir, bin = dir, filepath.Join(dir, "ncclrun")
	build := exec.Command("go", "build", "-o", bin,
		"-ldflags", "-X main.version="+testVersion+" -X main.commit="+testCommit+" -X runtime.godebugDefault=disablethp=1", ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build ncclrun:", err)
		return 1
	}
	testutil.UnignoreSignals()
	return m.Run()
}

// result is one finished ncclrun process.
type result struct {
	code           int
	stdout, stderr string
}

// lines are stderr's lines without the trailing empty one.
func (r result) errLines() []string {
	s := strings.TrimSuffix(r.stderr, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// invocation configures a run of the binary.
type invocation struct {
	args  []string
	env   []string // added to a minimal environment
	stdin string
	pre   []string // a command prefix (prlimit, setpriv ...)
	path  string   // the binary; "" is bin
	dir   string
}

// baseEnv is a small, predictable environment: no NCCL_* or NCCLRUN_* of
// the developer's leaks into a test.
func baseEnv(t *testing.T) []string {
	home := t.TempDir()
	return []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "LANG=C"}
}

func (iv invocation) run(t *testing.T) result {
	t.Helper()
	p := iv.path
	if p == "" {
		p = bin
	}
	argv := append(append(append([]string{}, iv.pre...), p), iv.args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(baseEnv(t), iv.env...)
	cmd.Stdin = strings.NewReader(iv.stdin)
	cmd.Dir = iv.dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
		if code < 0 {
			t.Fatalf("ncclrun %q was killed: %v (stderr %q)", iv.args, err, errb.String())
		}
	case err != nil:
		t.Fatalf("start ncclrun %q: %v", iv.args, err)
	}
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

func ncclrun(t *testing.T, args ...string) result {
	t.Helper()
	return invocation{args: args}.run(t)
}

// requireUsage asserts a usage error: status 2 and exactly one line
// `ncclrun: ...` on stderr, nothing on stdout.
func requireUsage(t *testing.T, r result, contains string) {
	t.Helper()
	require.Equal(t, ExitUsage, r.code, "stderr: %q", r.stderr)
	require.Len(t, r.errLines(), 1, "stderr: %q", r.stderr)
	require.True(t, strings.HasPrefix(r.stderr, "ncclrun: "), "stderr: %q", r.stderr)
	require.Contains(t, r.stderr, contains)
	require.Empty(t, r.stdout)
}

// writeTree writes files (path -> content) under a new directory.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, c := range files {
		full := filepath.Join(root, p)
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(c), 0o644))
	}
	return root
}

// fakeTree is a tiny /proc + /etc snapshot of a container on a node with
// one RDMA device (so memlock matters): uid, memlock soft/hard (as
// /proc/self/limits writes them) and capability masks.
func fakeTree(t *testing.T, uid int, soft, hard string, capEff string) string {
	t.Helper()
	return fakeTreeRDMA(t, uid, soft, hard, capEff, true)
}

// fakeTreeRDMA is fakeTree with or without the RDMA device.
func fakeTreeRDMA(t *testing.T, uid int, soft, hard string, capEff string, rdma bool) string {
	t.Helper()
	status := fmt.Sprintf(`Name:	ncclrun
Umask:	0022
State:	R (running)
Pid:	42
PPid:	1
Uid:	%[1]d	%[1]d	%[1]d	%[1]d
Gid:	%[1]d	%[1]d	%[1]d	%[1]d
Groups:	
NoNewPrivs:	0
CapInh:	0000000000000000
CapPrm:	%[2]s
CapEff:	%[2]s
CapBnd:	00000000a80425fb
CapAmb:	0000000000000000
`, uid, capEff)
	limits := fmt.Sprintf(`Limit                     Soft Limit           Hard Limit           Units     
Max cpu time              unlimited            unlimited            seconds   
Max file size             unlimited            unlimited            bytes     
Max open files            1048576              1048576              files     
Max locked memory         %-20s %-20s bytes     
Max address space         unlimited            unlimited            bytes     
`, soft, hard)
	files := map[string]string{
		"proc/self/status":  status,
		"proc/self/limits":  limits,
		"proc/self/uid_map": "         0          0 4294967295\n",
		"etc/passwd":        "root:x:0:0:root:/root:/bin/sh\ntrainer:x:1000:1000::/home/trainer:/bin/sh\n",
		"etc/group":         "root:x:0:\ntrainer:x:1000:\n",
		"dev/null":          "",
	}
	if rdma {
		for k, v := range map[string]string{
			"sys/class/infiniband/mlx5_0/ports/1/state":                         "4: ACTIVE\n",
			"sys/class/infiniband/mlx5_0/ports/1/link_layer":                    "InfiniBand\n",
			"sys/class/infiniband/mlx5_0/ports/1/rate":                          "400 Gb/sec (4X NDR)\n",
			"sys/class/infiniband/mlx5_0/device/infiniband_verbs/uverbs0/ibdev": "mlx5_0\n",
			"dev/infiniband/uverbs0":                                            "",
		} {
			files[k] = v
		}
	}
	return writeTree(t, files)
}

// decodeJSON parses s into a generic map, failing the test on bad JSON.
func decodeJSON(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(s), &m), "JSON: %s", s)
	return m
}

// check returns the check object with id from doctor JSON.
func check(t *testing.T, doc map[string]any, id string) map[string]any {
	t.Helper()
	checks, ok := doc["checks"].([]any)
	require.True(t, ok, "checks is not an array: %v", doc["checks"])
	for _, c := range checks {
		if m, ok := c.(map[string]any); ok && m["id"] == id {
			return m
		}
	}
	t.Fatalf("no check %q in %v", id, doc["checks"])
	return nil
}

// jpath walks nested JSON objects.
func jpath(t *testing.T, m map[string]any, keys ...string) any {
	t.Helper()
	var cur any = m
	for _, k := range keys {
		obj, ok := cur.(map[string]any)
		require.True(t, ok, "at %q: %v is not an object", k, cur)
		cur, ok = obj[k]
		require.True(t, ok, "no key %q in %v", k, obj)
	}
	return cur
}

// fakeCommands puts scripts (name -> sh body) in a directory and returns a
// PATH with it first.
func fakeCommands(t *testing.T, scripts map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range scripts {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body), 0o755))
	}
	return "PATH=" + dir + ":" + os.Getenv("PATH")
}
