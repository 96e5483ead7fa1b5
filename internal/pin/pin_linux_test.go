//go:build linux

package pin_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ncclrun/ncclrun/internal/pin"
	"github.com/ncclrun/ncclrun/internal/testutil"
)

// helperEnv selects the helper mode of the test binary: the value is the
// number of bytes to pin. The helper prints "ok" or the errno name (ENOMEM,
// EPERM) of the failure, or "error: ..." for anything else.
const helperEnv = "PIN_TEST_HELPER_SIZE"

func TestMain(m *testing.M) {
	if s := os.Getenv(helperEnv); s != "" {
		os.Exit(helper(s, os.Stdout))
	}
	os.Exit(m.Run())
}

func helper(s string, w io.Writer) int {
	size, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		fmt.Fprintf(w, "error: %v\n", err)
		return 3
	}
	release, err := pin.Pin(size)
	if err != nil {
		var errno unix.Errno
		if errors.As(err, &errno) {
			fmt.Fprintln(w, unix.ErrnoName(errno))
			return 0
		}
		fmt.Fprintf(w, "error: %v\n", err)
		return 3
	}
	release()
	fmt.Fprintln(w, "ok")
	return 0
}

// vmLck returns VmLck of this process in kB.
func vmLck(t *testing.T) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmLck:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			require.NoError(t, err)
			return n
		}
	}
	t.Fatal("no VmLck in /proc/self/status")
	return 0
}

func TestPinLocksAndReleases(t *testing.T) {
	var lim unix.Rlimit
	require.NoError(t, unix.Getrlimit(unix.RLIMIT_MEMLOCK, &lim))
	const size = 1 << 20
	if lim.Cur != unix.RLIM_INFINITY && lim.Cur < 2*size && os.Geteuid() != 0 {
		t.Skipf("RLIMIT_MEMLOCK %d is too low to lock %d bytes here", lim.Cur, size)
	}
	before := vmLck(t)
	release, err := pin.Pin(size)
	require.NoError(t, err)
	assert.Equal(t, before+size/1024, vmLck(t), "VmLck must grow by the pinned size")
	release()
	release() // a second call is a no-op
	assert.Equal(t, before, vmLck(t), "VmLck must return after release")
}

func TestPinBadSize(t *testing.T) {
	for _, n := range []int64{0, -1} {
		_, err := pin.Pin(n)
		assert.ErrorIs(t, err, pin.ErrBadSize, "size %d", n)
	}
}

// exposedBinary copies the test binary into a world-readable directory so
// that a helper started as another uid can execute it (go test's build
// directory is 0700).
func exposedBinary(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	require.NoError(t, err)
	dir, err := os.MkdirTemp("", "pin-test-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	data, err := os.ReadFile(self)
	require.NoError(t, err)
	bin := filepath.Join(dir, "pin.test")
	require.NoError(t, os.WriteFile(bin, data, 0o755))
	return bin
}

// TestPinUnderRealLimits runs the helper under prlimit (and setpriv) so the
// kernel's own RLIMIT_MEMLOCK and CAP_IPC_LOCK rules decide, in the
// credential states Docker and Kubernetes give a container.
func TestPinUnderRealLimits(t *testing.T) {
	testutil.RequireRoot(t)
	prlimit := testutil.RequireTool(t, "prlimit")
	setpriv := testutil.RequireTool(t, "setpriv")
	testutil.RequireCap(t, unix.CAP_IPC_LOCK)
	bin := exposedBinary(t)

	noIPCLock := []string{setpriv, "--inh-caps=-ipc_lock", "--bounding-set=-ipc_lock", "--"}
	asUser1000 := []string{setpriv, "--reuid=1000", "--regid=1000", "--clear-groups",
		"--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"}

	tests := []struct {
		name  string
		limit string // prlimit --memlock value (soft:hard)
		creds []string
		size  int64
		want  string
	}{
		{"64KiB limit, 64KiB without cap", "65536:65536", noIPCLock, 64 << 10, "ok"},
		{"64KiB limit, 128KiB without cap", "65536:65536", noIPCLock, 128 << 10, "ENOMEM"},
		{"64KiB limit, 16MiB without cap", "65536:65536", noIPCLock, 16 << 20, "ENOMEM"},
		{"limit 0 without cap", "0:0", noIPCLock, 4 << 10, "EPERM"},
		{"64KiB limit, 16MiB as root with CAP_IPC_LOCK", "65536:65536", nil, 16 << 20, "ok"},
		{"limit 0, root with CAP_IPC_LOCK", "0:0", nil, 64 << 10, "ok"},
		{"64KiB limit, uid 1000 without caps, 128KiB", "65536:65536", asUser1000, 128 << 10, "ENOMEM"},
		{"64KiB limit, uid 1000 without caps, 64KiB", "65536:65536", asUser1000, 64 << 10, "ok"},
		{"limit 0, uid 1000 without caps", "0:0", asUser1000, 4 << 10, "EPERM"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--memlock=" + tc.limit}, tc.creds...)
			args = append(args, bin)
			cmd := exec.Command(prlimit, args...)
			cmd.Env = append(os.Environ(), helperEnv+"="+strconv.FormatInt(tc.size, 10))
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			require.NoError(t, cmd.Run(), "stderr: %s", errb.String())
			assert.Equal(t, tc.want, strings.TrimSpace(out.String()), "stderr: %s", errb.String())
		})
	}
}
