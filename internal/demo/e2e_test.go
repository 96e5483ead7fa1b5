package demo

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ncclrun/ncclrun/internal/testutil"
)

// buildNcclrun builds cmd/ncclrun into a world-readable temporary
// directory (so another uid can run it) and returns the binary's path.
func buildNcclrun(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds ncclrun: not in -short")
	}
	if runtime.GOOS != "linux" {
		t.Skip("the demo needs Linux")
	}
	dir, err := os.MkdirTemp("", "ncclrun-demo-e2e-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	bin := filepath.Join(dir, "ncclrun")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/ncclrun/ncclrun/cmd/ncclrun")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

var (
	warnLine  = regexp.MustCompile(`(?m)^\S+:\d+:\d+ \[\d\] misc/ibvwrap\.cc:\d+ NCCL WARN Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory$`)
	diagnosis = regexp.MustCompile(`(?m)^ncclrun: .*(memlock|locked memory|RLIMIT_MEMLOCK)`)
)

// TestDemoEndToEnd runs `ncclrun demo` from a real build. It needs
// cmd/ncclrun's run, --report and diagnosis wired: until then it fails.
func TestDemoEndToEnd(t *testing.T) {
	bin := buildNcclrun(t)
	cmd := exec.Command(bin, "demo")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	t.Logf("stdout:\n%s\nstderr:\n%s", out.String(), errb.String())
	require.NoError(t, err)
	assert.Len(t, warnLine.FindAllString(out.String(), -1), 2, "both ranks' NCCL WARN relayed")
	assert.Regexp(t, diagnosis, errb.String(), "ncclrun's diagnosis on stderr")
	assert.Contains(t, out.String(), "Demo OK")
	assert.Contains(t, out.String(), "fake-nccl: all-reduce OK on 2 ranks")
}

// TestDemoAsUser runs the demo as uid 1000 without capabilities, where the
// fix is the machine's own memlock limit.
func TestDemoAsUser(t *testing.T) {
	out := demoAsUser(t, buildNcclrun(t), "-all", "/tmp")
	assert.Contains(t, out, "the memlock limit this machine allows")
	assert.Contains(t, out, "Demo OK")
}

// demoAsUser runs `bin demo` as uid 1000 with the bounding set setpriv's
// bounding gives (root only: setpriv switches users) and returns its
// stdout; the demo must exit 0.
func demoAsUser(t *testing.T, bin, bounding, home string) string {
	t.Helper()
	testutil.RequireRoot(t)
	setpriv := testutil.RequireTool(t, "setpriv")
	cmd := exec.Command(setpriv, "--reuid=1000", "--regid=1000", "--clear-groups",
		"--inh-caps=-all", "--bounding-set="+bounding, "--", bin, "demo")
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + home}
	cmd.Dir = "/"
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	t.Logf("stdout:\n%s\nstderr:\n%s", out.String(), errb.String())
	require.NoError(t, err)
	return out.String()
}

// TestDemoReaderGone: `ncclrun demo | head -1` ends quietly with the
// demo's own status (docs/contract.md: a stdout whose reader has gone
// ends a command other than run quietly), the runs' output dropped
// instead of failing them.
func TestDemoReaderGone(t *testing.T) {
	bin := buildNcclrun(t)
	r, w, err := os.Pipe()
	require.NoError(t, err)
	require.NoError(t, r.Close())
	cmd := exec.Command(bin, "demo")
	var errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = w, &errb
	err = cmd.Run()
	require.NoError(t, w.Close())
	require.NoError(t, err, "stderr:\n%s", errb.String())
	assert.NotContains(t, errb.String(), "broken pipe")
	assert.NotContains(t, errb.String(), "ncclrun: demo:")
}
