//go:build integration

package integration

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDockerfileBase builds the repository's Dockerfile.base for real on the
// local base image (BASE_IMAGE build argument; there is no registry) and
// runs its entrypoint as uid 1000 with only IPC_LOCK added, the Kubernetes
// trap: the file capability Dockerfile.base gives ncclrun must have survived
// the build, so CMD gets CAP_IPC_LOCK through its ambient set.
func TestDockerfileBase(t *testing.T) {
	requireNcclrun(t)
	base, kind := baseImage(t)
	df := filepath.Join(repoRoot, "Dockerfile.base")
	if _, err := os.Stat(df); err != nil {
		t.Fatalf("Dockerfile.base: %v (issue 8 asks for it to be built here)", err)
	}
	bin := filepath.Join(repoRoot, "bin", "ncclrun")
	if _, err := os.Stat(bin); err != nil { // `make integration` builds it first
		cmd := exec.Command("make", "build")
		cmd.Dir = repoRoot
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "make build: %s", out)
	}
	tag := imageTag("dockerfile-base")
	r := docker(t, "build", "-q", "--label", labelKey+"="+runID, "-f", df, "--build-arg", "BASE_IMAGE="+base, "-t", tag, repoRoot)
	require.Zerof(t, r.Code, "docker build -f Dockerfile.base on %s: %s %s", kind, r.Stdout, r.Stderr)

	// The entrypoint is ncclrun: arguments are ncclrun's.
	r = runContainer(t, []string{"--user", "1000:1000", "--cap-drop", "ALL", "--cap-add", "IPC_LOCK"}, tag, "doctor", "--json")
	var d doctorJSON
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &d), "doctor --json through the entrypoint: %s %s", r.Stdout, r.Stderr)
	_, capDetails := d.check(t, "capabilities")
	cmdState, _ := capDetails["command"].(map[string]any)
	assert.Equal(t, "ambient", cmdState["via"], "ncclrun's file capability survived the image build (capabilities: %v)", capDetails)

	r = runContainer(t, []string{"--user", "1000:1000", "--cap-drop", "ALL", "--cap-add", "IPC_LOCK"}, tag, "run", "--", "cat", "/proc/self/status")
	require.Zerof(t, r.Code, "ncclrun run -- cat: %s", r.Stderr)
	assert.Regexp(t, `(?m)^CapAmb:\s*0*4000$`, r.Stdout, "CMD's ambient set holds CAP_IPC_LOCK")
}
