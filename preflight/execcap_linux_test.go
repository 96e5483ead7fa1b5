//go:build linux

package preflight

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ncclrun/ncclrun/internal/pinrule"
	"github.com/ncclrun/ncclrun/internal/testutil"
)

// TestExecFileCapsLive reads real security.capability attributes (setting
// one needs CAP_SETFCAP, so root) through execFileCaps: the file itself,
// a script's interpreter, nested interpreters up to the kernel's five,
// and a FIFO or directory in CMD's place, which must not hang or count.
func TestExecFileCapsLive(t *testing.T) {
	testutil.RequireRoot(t)
	dir := t.TempDir()
	var fs unix.Statfs_t
	require.NoError(t, unix.Statfs(dir, &fs))
	honoured := fs.Flags&unix.ST_NOSUID == 0 // the kernel ignores file capabilities on a nosuid mount

	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(body), 0o755))
		return p
	}
	plain := write("plain", "\x7fELF not really")
	capP := write("cap-p", "\x7fELF not really")
	capEP := write("cap-ep", "\x7fELF not really")
	require.NoError(t, unix.Setxattr(capP, "security.capability", vfsCap(vfsCapRevision2, false, 1<<capIPCLock, 0, 0), 0))
	require.NoError(t, unix.Setxattr(capEP, "security.capability", vfsCap(vfsCapRevision2, true, 1<<capIPCLock, 0, 0), 0))
	script := write("script", "#!"+capP+" -x\nexec something\n")
	prev := script
	for i := range maxInterp - 1 {
		prev = write("chain"+strings.Repeat("x", i), "#! "+prev+"\n")
	}
	tooDeep := write("too-deep", "#!"+prev+"\n")
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, unix.Mkfifo(fifo, 0o644))

	p := pinrule.ExecFile{FileCap: honoured, IPCLockPermitted: honoured}
	ep := pinrule.ExecFile{FileCap: honoured, Effective: honoured, IPCLockPermitted: honoured}
	cases := []struct {
		name, path, file string
		want             pinrule.ExecFile
		err              string
	}{
		{"no file capability", plain, plain, pinrule.ExecFile{}, ""},
		{"cap_ipc_lock+p", capP, capP, p, ""},
		{"cap_ipc_lock+ep", capEP, capEP, ep, ""},
		{"a script: its interpreter's", script, capP, p, ""},
		{"five interpreters deep", prev, capP, p, ""},
		{"six is more than the kernel follows", tooDeep, "", pinrule.ExecFile{}, "more than 5"},
		{"a FIFO is not opened for good", fifo, fifo, pinrule.ExecFile{}, "not a regular file"},
		{"a directory", dir, dir, pinrule.ExecFile{}, "not a regular file"},
		{"missing", filepath.Join(dir, "none"), filepath.Join(dir, "none"), pinrule.ExecFile{}, "no such file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			done := make(chan struct{})
			var file string
			var got pinrule.ExecFile
			var err error
			go func() { file, got, err = execFileCaps(tc.path); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("execFileCaps blocked")
			}
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.file, file)
			assert.Equal(t, tc.want, got)
		})
	}
}

// TestExecFileCapsDepthAsKernel: execFileCaps follows as many #!
// interpreters as the kernel's execve does (five; a sixth is ELOOP), so
// it reads the file the exec would run wherever the exec succeeds. The
// kernel itself is the reference: each chain is exec'd.
func TestExecFileCapsDepthAsKernel(t *testing.T) {
	sh := testutil.RequireTool(t, "sh")
	dir := t.TempDir()
	prev := filepath.Join(dir, "s1")
	require.NoError(t, os.WriteFile(prev, []byte("#!"+sh+"\nexit 0\n"), 0o755))
	if err := exec.Command(prev).Run(); errors.Is(err, os.ErrPermission) {
		testutil.SkipOrFail(t, "the temporary directory does not allow exec: %v", err)
	}
	for depth := 1; depth <= 7; depth++ {
		if depth > 1 {
			p := filepath.Join(dir, "s"+strconv.Itoa(depth))
			require.NoError(t, os.WriteFile(p, []byte("#!"+prev+"\n"), 0o755))
			prev = p
		}
		runErr := exec.Command(prev).Run()
		file, _, err := execFileCaps(prev)
		if errors.Is(runErr, unix.ELOOP) {
			require.Error(t, err, "%d interpreters: the kernel refuses the exec", depth)
			assert.Contains(t, err.Error(), "more than")
			continue
		}
		require.NoError(t, runErr, "%d interpreters", depth)
		require.NoError(t, err, "%d interpreters: the kernel runs it", depth)
		assert.Equal(t, sh, file, "%d interpreters", depth)
	}
}

// TestExecFileCapsDeviceNotOpened: a device node in CMD's place is never
// opened (opening one can act: a serial line's DTR, a watchdog, a tape's
// rewind), only looked at. A character device without a driver tells:
// opening it fails with ENXIO, looking at it does not.
func TestExecFileCapsDeviceNotOpened(t *testing.T) {
	testutil.RequireRoot(t) // mknod needs CAP_MKNOD
	dev := filepath.Join(t.TempDir(), "dev")
	require.NoError(t, unix.Mknod(dev, unix.S_IFCHR|0o755, int(unix.Mkdev(4095, 255))))
	fd, err := unix.Open(dev, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err == nil {
		_ = unix.Close(fd)
		testutil.SkipOrFail(t, "char device 4095:255 has a driver here")
	}
	_, _, err = execFileCaps(dev)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not a regular file")
}
