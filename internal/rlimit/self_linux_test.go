package rlimit

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// selfMayRaiseHard reads this process's CapEff and uid_map from /proc, as
// a snapshot records them, and applies HardRaisePermitted.
func selfMayRaiseHard(t *testing.T) (permitted, ok bool) {
	t.Helper()
	st, err := os.ReadFile("/proc/thread-self/status")
	if err != nil {
		return false, false
	}
	var eff uint64
	found := false
	for _, l := range strings.Split(string(st), "\n") {
		if v, cut := strings.CutPrefix(l, "CapEff:"); cut {
			eff, err = strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			found = err == nil
		}
	}
	m, err := os.ReadFile("/proc/self/uid_map")
	if !found || err != nil {
		return false, false
	}
	initNS := strings.Join(strings.Fields(string(m)), " ") == "0 0 4294967295"
	const sysResource = 24
	return HardRaisePermitted(eff&(1<<sysResource) != 0, initNS), true
}

// TestRaiseMatchesKernelInUserNS runs TestRaiseMatchesKernel again in a
// helper process (this test binary) in a new user namespace, root there
// with every capability: the kernel refuses the hard raise all the same,
// and the prediction must say so.
func TestRaiseMatchesKernelInUserNS(t *testing.T) {
	if os.Getenv("RLIMIT_TEST_CHILD") != "" {
		t.Skip("already the helper")
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe, "-test.run", "^TestRaiseMatchesKernel$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "RLIMIT_TEST_CHILD=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
	}
	out, err := cmd.CombinedOutput()
	if err != nil && strings.Contains(err.Error(), "fork/exec") {
		if os.Getenv("CI") == "true" {
			t.Fatalf("cannot create a user namespace: %v", err)
		}
		t.Skipf("cannot create a user namespace: %v", err)
	}
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "--- PASS: TestRaiseMatchesKernel", "%s", out)
}
