package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// trustHelperEnv makes the test binary a helper instead of running tests.
const trustHelperEnv = "NCCLRUN_TRUST_HELPER"

func init() {
	if os.Getenv(trustHelperEnv) != "ptrace-seize" {
		return
	}
	// ptrace-seize PID: what a debugger (py-spy, gdb) does first; prints
	// "attached" or the errno's name, and exits 0 either way.
	runtime.LockOSThread() // ptrace requests are per thread
	pid, err := strconv.Atoi(os.Args[len(os.Args)-1])
	if err != nil {
		fmt.Println("bad pid")
		os.Exit(2)
	}
	if err := unix.PtraceSeize(pid); err != nil {
		fmt.Println(unix.ErrnoName(err.(unix.Errno)))
		os.Exit(0)
	}
	fmt.Println("attached")
	os.Exit(0) // exiting detaches
}

// Promise: CMD started by the cap_ipc_lock+p binary holds
// CAP_IPC_LOCK in its permitted set, so a same-uid tool lacking it cannot
// ptrace it (EPERM: the kernel wants the tracer's permitted set to include
// the tracee's); the same tool started through ncclrun's hand-off
// (`ncclrun --no-watch --quiet -- TOOL`) can.
func TestTrustDebuggerThroughTheHandOff(t *testing.T) {
	capBin := capCopy(t)
	// The helper: this test binary, copied where uid 1000 may run it.
	self, err := os.Executable()
	require.NoError(t, err)
	tool := filepath.Join(filepath.Dir(capBin), "ptrace-tool")
	data, err := os.ReadFile(self)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(tool, data, 0o755))

	// CMD: a shell that prints its pid and waits for stdin to close.
	cmd := exec.Command(asUser1000[0], append(append([]string{}, asUser1000[1:]...), capBin, "--quiet", "--", "sh", "-c", `echo $$; read x`)...)
	cmd.Env = baseEnv(t)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { stdin.Close(); _ = cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	pid := strings.TrimSpace(line)
	caps := capsOf(t, mustRead(t, "/proc/"+pid+"/status"))
	require.Equal(t, ipcLockMask, caps["CapPrm"], "CMD holds CAP_IPC_LOCK in its permitted set")

	env := []string{trustHelperEnv + "=ptrace-seize"}
	plain := invocation{pre: asUser1000, path: tool, env: env, args: []string{pid}}.run(t)
	assert.Equal(t, "EPERM\n", plain.stdout, "a same-uid tool without CAP_IPC_LOCK (stderr %q)", plain.stderr)
	handed := invocation{pre: asUser1000, path: capBin, env: env, args: []string{"--no-watch", "--quiet", "--", tool, pid}}.run(t)
	assert.Equal(t, 0, handed.code, "stderr %q", handed.stderr)
	assert.Equal(t, "attached\n", handed.stdout, "the tool started through ncclrun's hand-off (stderr %q)", handed.stderr)
}
