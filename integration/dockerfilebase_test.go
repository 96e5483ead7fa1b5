//go:build integration

package integration

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	dfBaseOnce sync.Once
	dfBaseImg  string
	dfBaseErr  error
)

// dockerfileBaseImage builds (once) the repository's Dockerfile.base for
// real on the local base image (BASE_IMAGE build argument; there is no
// registry), with REQUIRE_FILECAP=1, and returns its tag.
func dockerfileBaseImage(t *testing.T) string {
	t.Helper()
	requireNcclrun(t)
	base, kind := baseImage(t)
	dfBaseOnce.Do(func() {
		// Until the build succeeds: a helper that stops the first test
		// (t.Fatal inside Do) must not leave the others an empty tag.
		dfBaseErr = errors.New("the Dockerfile.base build stopped early: see the first test that asked for it")
		df := filepath.Join(repoRoot, "Dockerfile.base")
		if _, err := os.Stat(df); err != nil {
			dfBaseErr = fmt.Errorf("Dockerfile.base: %w (the suite builds the image users build)", err)
			return
		}
		// The context Dockerfile.base expects (bin/ncclrun, as `make build`
		// leaves it), with this run's static build rather than whatever
		// stale binary bin/ may hold.
		ctx, err := os.MkdirTemp("", "ncclrun-it-dfbase-")
		if err != nil {
			dfBaseErr = err
			return
		}
		defer os.RemoveAll(ctx)
		nccl, err := os.ReadFile(filepath.Join(binDir, "ncclrun"))
		if err == nil {
			err = os.MkdirAll(filepath.Join(ctx, "bin"), 0o755)
		}
		if err == nil {
			err = os.WriteFile(filepath.Join(ctx, "bin", "ncclrun"), nccl, 0o755)
		}
		if err != nil {
			dfBaseErr = err
			return
		}
		tag := imageTag("dockerfile-base")
		r := docker(t, "build", "-q", "--label", labelKey+"="+runID, "-f", df, "--build-arg", "BASE_IMAGE="+base, "--build-arg", "REQUIRE_FILECAP=1", "-t", tag, ctx)
		if r.Code != 0 {
			dfBaseErr = fmt.Errorf("docker build -f Dockerfile.base on %s: %s %s", kind, r.Stdout, r.Stderr)
			return
		}
		dfBaseImg, dfBaseErr = tag, nil
	})
	require.NoError(t, dfBaseErr)
	return dfBaseImg
}

// TestDockerfileBase runs the entrypoint of the Dockerfile.base image as
// uid 1000 with only IPC_LOCK added, the Kubernetes trap: the file
// capability Dockerfile.base gives ncclrun must have survived the build, so
// CMD gets CAP_IPC_LOCK through its ambient set.
func TestDockerfileBase(t *testing.T) {
	tag := dockerfileBaseImage(t)

	// The entrypoint is `ncclrun --`: arguments after the image are CMD, so
	// doctor needs the entrypoint overridden (same binary, same file).
	r := runContainer(t, []string{"--user", "1000:1000", "--cap-drop", "ALL", "--cap-add", "IPC_LOCK", "--entrypoint", "/usr/local/bin/ncclrun"}, tag, "doctor", "--json")
	var d doctorJSON
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &d), "doctor --json through the entrypoint: %s %s", r.Stdout, r.Stderr)
	_, capDetails := d.check(t, "capabilities")
	cmdState, _ := capDetails["command"].(map[string]any)
	assert.Equal(t, "ambient", cmdState["via"], "ncclrun's file capability survived the image build (capabilities: %v)", capDetails)

	r = runContainer(t, []string{"--user", "1000:1000", "--cap-drop", "ALL", "--cap-add", "IPC_LOCK"}, tag, "cat", "/proc/self/status")
	require.Zerof(t, r.Code, "entrypoint (ncclrun --) cat: %s", r.Stderr)
	assert.Regexp(t, `(?m)^CapAmb:\s*0*4000$`, r.Stdout, "CMD's ambient set holds CAP_IPC_LOCK")
}
