//go:build integration

package integration

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ncclrun/ncclrun/internal/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestRuncSpecPermittedDecidesNNP separates what runc does from what Docker
// asks of it. docs/research/capabilities.md §1.8 (row 7b) says a setcap'd PID 1
// keeps cap_ipc_lock under no_new_privs because runc-init still holds the
// spec's permitted set when it execs. That is true, but only when the spec
// puts the capability in the permitted set for a non-root user, as
// containerd's CRI plugin (Kubernetes) does (TestCRIScenarios sees it on a
// real CRI). Docker (moby
// oci.SetCapabilities since 20.10.14) gives a non-root user only the
// bounding set, so under Docker the file capability is lost
// (TestRuntimeFacts/user1000-filecap-nnp-exec). Here runc runs the same
// binary with both kinds of spec.
func TestRuncSpecPermittedDecidesNNP(t *testing.T) {
	requireDocker(t) // the same engine host; runc comes with it
	testutil.RequireRoot(t)
	runc := testutil.RequireTool(t, "runc")
	probeBin, err := os.ReadFile(filepath.Join(binDir, "capprobe"))
	require.NoError(t, err)

	for _, tc := range []struct {
		name      string
		permitted bool // spec lists CAP_IPC_LOCK in effective+permitted too
		wantPrm   bool
	}{
		{"bounding only (Docker's spec for a non-root user)", false, false},
		{"bounding+permitted+effective (containerd CRI's spec)", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bundle := t.TempDir()
			rootfs := filepath.Join(bundle, "rootfs")
			require.NoError(t, os.MkdirAll(filepath.Join(rootfs, "proc"), 0o755))
			p := filepath.Join(rootfs, "capprobe-cap")
			require.NoError(t, os.WriteFile(p, probeBin, 0o755))
			require.NoError(t, unix.Setxattr(p, "security.capability", []byte(vfsCapIPCLockP()), 0), "setting the file capability")
			// The bundle must be reachable by uid 1000 for the exec.
			require.NoError(t, os.Chmod(bundle, 0o755))

			spec := exec.Command(runc, "spec")
			spec.Dir = bundle
			out, err := spec.CombinedOutput()
			require.NoError(t, err, "runc spec: %s", out)
			var cfg map[string]any
			b, err := os.ReadFile(filepath.Join(bundle, "config.json"))
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal(b, &cfg))
			proc := cfg["process"].(map[string]any)
			proc["terminal"] = false
			proc["args"] = []string{"/capprobe-cap", "--mlock", strconv.Itoa(pinBytes)}
			proc["user"] = map[string]any{"uid": 1000, "gid": 1000}
			proc["noNewPrivileges"] = true
			capSet := map[string]any{"bounding": []string{"CAP_IPC_LOCK"}}
			if tc.permitted {
				capSet["effective"] = []string{"CAP_IPC_LOCK"}
				capSet["permitted"] = []string{"CAP_IPC_LOCK"}
			}
			proc["capabilities"] = capSet
			cfg["root"] = map[string]any{"path": "rootfs", "readonly": true}
			b, err = json.Marshal(cfg)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(bundle, "config.json"), b, 0o644))

			run := exec.Command(runc, "--root", filepath.Join(bundle, "state"), "run", "--bundle", bundle, "ncclrun-it-"+runID)
			var stderr strings.Builder
			run.Stderr = &stderr
			out, err = run.Output()
			require.NoError(t, err, "runc run: %s", stderr.String())
			pr := parseProbe(t, string(out))
			assert.Equal(t, 1000, pr.UID)
			assert.Equal(t, 1, pr.NoNewPrivs)
			assert.True(t, pr.IPCLock["CapBnd"])
			assert.Equal(t, tc.wantPrm, pr.IPCLock["CapPrm"], "CAP_IPC_LOCK permitted after exec of the +p file under NNP (caps %v)", pr.Caps)
		})
	}
}
