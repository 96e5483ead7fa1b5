package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ncclrun/ncclrun/internal/testutil"
)

// Fault tests of `ncclrun run` as a real process (docs/reliability.md).
// Synchronisation is by pipes, pidfds and waitid; the only timeouts are
// hang guards.

// hangGuard is how long a test waits for something that must happen
// before it declares ncclrun hung.
const hangGuard = 60 * time.Second

// started is a running ncclrun whose stdio the test holds.
type started struct {
	cmd    *exec.Cmd
	stdin  *os.File // the test's end of ncclrun's stdin
	stdout *os.File // the test's end of ncclrun's stdout
	stderr *os.File
	done   chan struct{}
	err    error
}

// startNcclrun starts ncclrun with pipes the test reads itself (exec.Cmd
// copies nothing, so Wait never waits for a reader). pipeSize > 0 shrinks
// the stdout and stderr pipes to that many bytes.
func startNcclrun(t *testing.T, env []string, pipeSize int, args ...string) *started {
	t.Helper()
	s := &started{done: make(chan struct{})}
	inR, inW, err := os.Pipe()
	require.NoError(t, err)
	outR, outW, err := os.Pipe()
	require.NoError(t, err)
	errR, errW, err := os.Pipe()
	require.NoError(t, err)
	if pipeSize > 0 {
		for _, f := range []*os.File{outW, errW} {
			_, err := unix.FcntlInt(f.Fd(), unix.F_SETPIPE_SZ, pipeSize)
			require.NoError(t, err)
		}
	}
	s.cmd = exec.Command(bin, args...)
	s.cmd.Env = append(baseEnv(t), env...)
	s.cmd.Stdin, s.cmd.Stdout, s.cmd.Stderr = inR, outW, errW
	require.NoError(t, s.cmd.Start())
	inR.Close()
	outW.Close()
	errW.Close()
	s.stdin, s.stdout, s.stderr = inW, outR, errR
	go func() { s.err = s.cmd.Wait(); close(s.done) }()
	t.Cleanup(func() {
		select {
		case <-s.done:
		default:
			_ = s.cmd.Process.Kill()
			<-s.done
		}
		inW.Close()
		outR.Close()
		errR.Close()
	})
	return s
}

// wait waits (at most hangGuard) for ncclrun to exit and returns its exit
// status; a death by signal N is 128+N, as a shell reports it.
func (s *started) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-s.done:
	case <-time.After(hangGuard):
		t.Fatalf("ncclrun did not exit within %v (hang guard)", hangGuard)
	}
	var ee *exec.ExitError
	if errors.As(s.err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	require.NoError(t, s.err)
	return 0
}

// readAllGuarded reads f to EOF on a goroutine; the result comes on the channel.
func readAllGuarded(f *os.File) <-chan []byte {
	ch := make(chan []byte, 1)
	go func() { b, _ := io.ReadAll(f); ch <- b }()
	return ch
}

func recv(t *testing.T, ch <-chan []byte, what string) []byte {
	t.Helper()
	select {
	case b := <-ch:
		return b
	case <-time.After(hangGuard):
		t.Fatalf("%s: no EOF within %v (hang guard)", what, hangGuard)
		return nil
	}
}

// waitPidExit waits (hang guard) until process pid, not a child of the
// test, has exited; false when it still runs at the guard.
func waitPidExit(t *testing.T, pid int) bool {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return true
	}
	require.NoError(t, err)
	defer unix.Close(fd)
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(pfd, int(hangGuard/time.Millisecond))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		require.NoError(t, err)
		return n == 1
	}
}

// pipeFill reports how many bytes wait in the pipe read end f.
func pipeFill(t *testing.T, f *os.File) int {
	t.Helper()
	n, err := unix.IoctlGetInt(int(f.Fd()), unix.TIOCINQ)
	require.NoError(t, err)
	return n
}

// Promise: a slow reader loses nothing. The reader of ncclrun's stdout
// stops reading until its (16 KiB) pipe is full, over and over, so ncclrun
// and the child are held back; every byte still arrives, in order, on
// both streams.
func TestFaultSlowReaderLosesNothing(t *testing.T) {
	dir := t.TempDir()
	out := make([]byte, 3<<20)
	errData := make([]byte, 1<<20)
	rng := rand.New(rand.NewSource(7))
	rng.Read(out)
	rng.Read(errData)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "out"), out, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "err"), errData, 0o644))

	// A 16 KiB pipe (4 pages); "full" is 3 pages or more waiting: a
	// partly read head page cannot be filled again.
	const pipe, full = 16 << 10, 12 << 10
	s := startNcclrun(t, nil, pipe, "--quiet", "--", "sh", "-c", `cat "$1" & cat "$2" >&2; wait`, "sh",
		filepath.Join(dir, "out"), filepath.Join(dir, "err"))
	errCh := readAllGuarded(s.stderr)

	var got bytes.Buffer
	buf := make([]byte, 700)
	stalls := 0
	for {
		if got.Len()+pipe <= len(out) && got.Len()%(pipe*12) < 700 {
			// Stall: read nothing until the pipe is full, so ncclrun's
			// write blocks (backpressure), then go on in small reads.
			deadline := time.Now().Add(hangGuard)
			for pipeFill(t, s.stdout) < full {
				require.True(t, time.Now().Before(deadline), "pipe never filled (hang guard)")
				runtime.Gosched()
			}
			stalls++
		}
		n, err := s.stdout.Read(buf[:1+rng.Intn(len(buf)-1)])
		got.Write(buf[:n])
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
	}
	require.Equal(t, 0, s.wait(t))
	require.True(t, bytes.Equal(out, got.Bytes()), "stdout differs: got %d bytes of %d", got.Len(), len(out))
	require.True(t, bytes.Equal(errData, recv(t, errCh, "stderr")), "stderr differs")
	require.Greater(t, stalls, 10, "the reader must have held ncclrun back")
}

// Promise: when the reader of ncclrun's stdout goes away (EPIPE), the
// child keeps running: its output to that stream is read and discarded,
// ncclrun says so once on stderr and exits with the child's status.
func TestFaultReaderGoneChildKeepsRunning(t *testing.T) {
	script := `echo started; read go; i=0; while [ $i -lt 2000 ]; do echo "line $i"; i=$((i+1)); done; echo "alive after $i lines" >&2; exit 3`
	s := startNcclrun(t, nil, 0, "--quiet", "--", "sh", "-c", script)
	errCh := readAllGuarded(s.stderr)
	line, err := bufio.NewReader(s.stdout).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "started\n", line)
	require.NoError(t, s.stdout.Close()) // the reader goes away
	_, err = s.stdin.WriteString("go\n")
	require.NoError(t, err)
	require.NoError(t, s.stdin.Close())

	code := s.wait(t)
	stderr := string(recv(t, errCh, "stderr"))
	require.Equal(t, 3, code, "ncclrun exits with the child's status; stderr %q", stderr)
	require.Contains(t, stderr, "alive after 2000 lines\n", "the child must not die of SIGPIPE")
	var own []string
	for _, l := range strings.Split(strings.TrimSpace(stderr), "\n") {
		if strings.HasPrefix(l, "ncclrun: ") {
			own = append(own, l)
		}
	}
	require.Len(t, own, 1, "said once: %q", stderr)
	require.Contains(t, own[0], "stdout")
}

// Promise: a child that closes its stdout and stderr but keeps running is
// still supervised: ncclrun waits for it and exits with its status.
func TestFaultChildClosesStreamsButRuns(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "closed")
	require.NoError(t, unix.Mkfifo(fifo, 0o600))
	script := `echo closing; exec >&- 2>&-; echo closed > "$1"; read go; exit 5`
	s := startNcclrun(t, nil, 0, "--quiet", "--", "sh", "-c", script, "sh", fifo)
	outCh := readAllGuarded(s.stdout)
	b, err := os.ReadFile(fifo) // the child has closed its streams
	require.NoError(t, err)
	require.Equal(t, "closed\n", string(b))
	select {
	case <-s.done:
		t.Fatalf("ncclrun exited while the child still ran: %v", s.err)
	default:
	}
	_, err = s.stdin.WriteString("go\n")
	require.NoError(t, err)
	require.Equal(t, 5, s.wait(t))
	require.Equal(t, "closing\n", string(recv(t, outCh, "stdout")))
}

// Promise: a daemon that the child forked and that keeps the output pipe
// open does not keep ncclrun alive: ncclrun exits about a second after the
// child with the child's status, and the daemon gets SIGTERM.
func TestFaultDaemonHoldingPipeDoesNotHang(t *testing.T) {
	mark := filepath.Join(t.TempDir(), "daemon-got-term")
	daemon := fmt.Sprintf(`trap 'echo TERM > %q; exit 0' TERM; while :; do sleep 1; done`, mark)
	// The daemon's stderr goes to /dev/null: a shell prints "Terminated"
	// there when its foreground sleep is killed, and would die of SIGPIPE.
	script := `sh -c "$1" 2>/dev/null & echo "$!"; exit 4`
	s := startNcclrun(t, nil, 0, "--quiet", "--", "sh", "-c", script, "sh", daemon)
	line, err := bufio.NewReader(s.stdout).ReadString('\n')
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	require.NoError(t, err, "child said %q", line)
	require.Equal(t, 4, s.wait(t))
	require.True(t, waitPidExit(t, pid), "daemon %d still runs", pid)
	require.FileExists(t, mark, "the daemon was sent SIGTERM")
}

// Promise: a worker that ignores SIGTERM is killed --kill-after after the
// forwarded SIGTERM, with its whole tree; ncclrun exits 137.
func TestFaultIgnoresTermKilledAfterKillAfter(t *testing.T) {
	// The worker ignores TERM (an ignored disposition survives exec), and
	// so does its parent.
	s := startNcclrun(t, nil, 0, "--quiet", "--kill-after", "1s", "--", "sh", "-c",
		`trap '' TERM; sh -c 'echo $$; exec sleep 1000' & wait`)
	line, err := bufio.NewReader(s.stdout).ReadString('\n')
	require.NoError(t, err)
	worker, err := strconv.Atoi(strings.TrimSpace(line))
	require.NoError(t, err, "child said %q", line)
	require.NoError(t, s.cmd.Process.Signal(unix.SIGTERM))
	require.Equal(t, 137, s.wait(t), "killed by SIGKILL after --kill-after")
	require.True(t, waitPidExit(t, worker), "the worker %d survived", worker)
}

// Promise: bursts of signals during start-up and during shutdown neither
// kill nor hang ncclrun nor change its exit status, and the report is
// still written.
func TestFaultSignalBursts(t *testing.T) {
	t.Run("start-up", func(t *testing.T) {
		report := filepath.Join(t.TempDir(), "report.json")
		s := startNcclrun(t, nil, 0, "--quiet", "--report", report, "--", "sh", "-c", `read go; exit 7`)
		for i := 0; i < 300; i++ { // harmless by default for everyone: must stay harmless
			for _, sig := range []unix.Signal{unix.SIGWINCH, unix.SIGCONT, unix.SIGURG, unix.SIGCHLD} {
				if err := s.cmd.Process.Signal(sig); err != nil {
					t.Fatalf("ncclrun is gone during the burst: %v", err)
				}
			}
		}
		_, err := s.stdin.WriteString("go\n")
		require.NoError(t, err)
		require.Equal(t, 7, s.wait(t))
		require.Contains(t, mustRead(t, report), `"exit_code": 7`)
	})
	t.Run("shutdown", func(t *testing.T) {
		// The child exits while a daemon holds its output: ncclrun is
		// draining. A burst of SIGTERM/SIGINT/SIGHUP arrives then (a
		// kubelet stopping the pod): the status stays the child's, the
		// report is written and the daemon is stopped.
		report := filepath.Join(t.TempDir(), "report.json")
		s := startNcclrun(t, nil, 0, "--quiet", "--kill-after", "2s", "--report", report, "--", "sh", "-c",
			`sh -c 'trap "exit 0" TERM; while :; do sleep 1; done' & echo "$$ $!"; exit 6`)
		line, err := bufio.NewReader(s.stdout).ReadString('\n')
		require.NoError(t, err)
		var child, daemon int
		_, err = fmt.Sscanf(line, "%d %d", &child, &daemon)
		require.NoError(t, err, "child said %q", line)
		require.True(t, waitPidExit(t, child))
		for i := 0; i < 100; i++ {
			for _, sig := range []unix.Signal{unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGWINCH} {
				if s.cmd.Process.Signal(sig) != nil {
					break // ncclrun has exited
				}
			}
		}
		require.Equal(t, 6, s.wait(t), "the child's status, not the signal's")
		require.Contains(t, mustRead(t, report), `"exit_code": 6`)
		require.True(t, waitPidExit(t, daemon))
	})
}

// Promise: on a terminal, ^Z (SIGTSTP) stops the child and then ncclrun,
// so the shell sees the job stop; SIGCONT resumes both; the job then
// finishes normally.
func TestFaultJobControlOnTerminal(t *testing.T) {
	ptmx, tty, err := pty.Open()
	require.NoError(t, err)
	defer ptmx.Close()
	go func() { _, _ = io.Copy(io.Discard, ptmx) }()
	inR, inW, err := os.Pipe()
	require.NoError(t, err)
	defer inW.Close()
	ready := filepath.Join(t.TempDir(), "ready")
	require.NoError(t, unix.Mkfifo(ready, 0o600))
	cmd := exec.Command(bin, "--quiet", "--", "sh", "-c", `echo "$$" > "$1"; read go; exit 9`, "sh", ready)
	cmd.Env = baseEnv(t)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, tty, tty
	require.NoError(t, cmd.Start())
	inR.Close()
	tty.Close()
	b, err := os.ReadFile(ready)
	require.NoError(t, err)
	child, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)

	pid := cmd.Process.Pid
	require.NoError(t, unix.Kill(pid, unix.SIGTSTP))
	var info unix.Siginfo
	require.NoError(t, unix.Waitid(unix.P_PID, pid, &info, unix.WSTOPPED|unix.WNOWAIT, nil), "ncclrun stops")
	deadline := time.Now().Add(hangGuard) // the stop is asynchronous: wait for it
	for procState(t, child) != 'T' {
		require.True(t, time.Now().Before(deadline), "the child was not stopped (hang guard)")
		runtime.Gosched()
	}
	require.NoError(t, unix.Kill(pid, unix.SIGCONT))
	require.NoError(t, unix.Waitid(unix.P_PID, pid, &info, unix.WCONTINUED|unix.WNOWAIT, nil), "ncclrun continues")
	_, err = inW.WriteString("go\n")
	require.NoError(t, err)
	require.Equal(t, 9, waitExit(t, cmd, "after SIGCONT"), "the stopped child was continued and finished")
}

// procState is the state letter of /proc/PID/stat.
func procState(t *testing.T, pid int) byte {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	require.NoError(t, err)
	i := bytes.LastIndexByte(b, ')')
	require.Positive(t, i)
	return bytes.TrimSpace(b[i+1:])[0]
}

// Promise: as PID 1 of a container, ncclrun reaps every orphan, even
// hundreds at once: the child waits until no zombie is left in the PID
// namespace (it would wait forever otherwise) and ncclrun exits 0.
func TestFaultZombieHeavyChildAsPID1(t *testing.T) {
	testutil.RequireRoot(t)
	unshare := testutil.RequireTool(t, "unshare")
	script := `
i=0; while [ $i -lt 300 ]; do sh -c 'true & exit 0'; i=$((i+1)); done
zombies() { n=0; for f in /proc/[0-9]*/stat; do s=$(cut -d')' -f2 "$f" 2>/dev/null | cut -d' ' -f2); [ "$s" = Z ] && n=$((n+1)); done; echo $n; }
while [ "$(zombies)" != 0 ]; do :; done
echo "pid1=$(cut -d' ' -f1 /proc/1/stat) no zombies"`
	r := invocation{pre: []string{unshare, "--pid", "--fork", "--mount-proc"}, args: []string{"--quiet", "--", "sh", "-c", script}}.run(t)
	require.Equal(t, 0, r.code, "stderr %q", r.stderr)
	require.Equal(t, "pid1=1 no zombies\n", r.stdout)
}

// Promise: a --report or termination log that cannot be written is a
// warning; the job's exit status is the child's.
func TestFaultUnwritableReportAndTerminationLog(t *testing.T) {
	dir := t.TempDir()
	asDir := filepath.Join(dir, "a-directory")
	require.NoError(t, os.Mkdir(asDir, 0o755))
	for name, p := range map[string]string{
		"missing directory": filepath.Join(dir, "no", "such", "file"),
		"a directory":       asDir,
		"/dev/full":         "/dev/full",
		"/proc":             "/proc/version",
	} {
		t.Run(name, func(t *testing.T) {
			r := ncclrun(t, "--report", p, "--termination-log", p, "--", "sh", "-c", "echo out; exit 12")
			require.Equal(t, 12, r.code, "stderr %q", r.stderr)
			require.Equal(t, "out\n", r.stdout)
			require.Contains(t, r.stderr, "ncclrun: warning: --report")
			require.Contains(t, r.stderr, "ncclrun: warning: termination log")
		})
	}
}

// Promise: with stdout and stderr on one pipe whose reader went away
// (`ncclrun ... 2>&1 | head -1`), ncclrun's own messages (the diagnosis,
// the summary after the child exited) fail quietly: ncclrun is not killed
// by SIGPIPE and exits with the child's status; the report says what was
// found.
func TestFaultBothStreamsGone(t *testing.T) {
	r, w, err := os.Pipe()
	require.NoError(t, err)
	inR, inW, err := os.Pipe()
	require.NoError(t, err)
	report := filepath.Join(t.TempDir(), "report.json")
	script := `echo started; read go; i=0; while [ $i -lt 50 ]; do echo "node-a:1:2 [0] NCCL WARN Call to ibv_reg_mr failed with error Cannot allocate memory"; i=$((i+1)); done; echo gone >&2; exit 3`
	cmd := exec.Command(bin, "--report", report, "--", "sh", "-c", script)
	cmd.Env = baseEnv(t)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, w, w
	require.NoError(t, cmd.Start())
	inR.Close()
	w.Close()
	line, err := bufio.NewReader(r).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "started\n", line)
	r.Close()
	_, err = inW.WriteString("go\n")
	require.NoError(t, err)
	inW.Close()
	require.Equal(t, 3, waitExit(t, cmd, ""), "the child's status")
	require.Contains(t, mustRead(t, report), `"id": "memlock"`)
}

// waitExit waits for the started ncclrun with a hang guard (never a
// synchronisation: the wait itself is) and returns its exit status; it
// fails the test if ncclrun hangs (killing it) or exits 0 without a status.
func waitExit(t *testing.T, cmd *exec.Cmd, when string) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(hangGuard):
		_ = cmd.Process.Kill()
		t.Fatalf("ncclrun hung %s", when)
	}
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	return ee.ExitCode()
}
