package launcher

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ncclrun/ncclrun/internal/rlimit"
	"github.com/ncclrun/ncclrun/internal/testutil"
)

// helperConfig runs the test binary as helper name.
func helperConfig(t *testing.T, name string, args ...string) Config {
	t.Helper()
	self, err := os.Executable()
	require.NoError(t, err)
	return Config{
		Path: self, Args: args,
		Env:    append(os.Environ(), helperEnv+"="+name),
		Stdin:  bytes.NewReader(nil),
		Stdout: io.Discard, Stderr: io.Discard,
	}
}

// watchBuf is a goroutine-safe buffer whose content can be waited for.
type watchBuf struct {
	mu   sync.Mutex
	cond *sync.Cond
	b    bytes.Buffer
}

func newWatchBuf() *watchBuf { w := &watchBuf{}; w.cond = sync.NewCond(&w.mu); return w }

func (w *watchBuf) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cond.Broadcast()
	return w.b.Write(p)
}

func (w *watchBuf) String() string { w.mu.Lock(); defer w.mu.Unlock(); return w.b.String() }

// waitFor blocks until the buffer holds sub (the test's own -timeout is
// the only limit) and returns the content.
func (w *watchBuf) waitFor(sub string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	for !strings.Contains(w.b.String(), sub) {
		w.cond.Wait()
	}
	return w.b.String()
}

type runResult struct {
	res Result
	err error
}

func runAsync(cfg Config) <-chan runResult {
	ch := make(chan runResult, 1)
	go func() { r, err := Run(cfg); ch <- runResult{r, err} }()
	return ch
}

func TestRunExitCodesAll(t *testing.T) {
	for code := 0; code <= 255; code++ {
		res, err := Run(helperConfig(t, "exit", strconv.Itoa(code)))
		require.NoError(t, err)
		require.Equal(t, Result{ExitCode: code}, res, "exit %d", code)
	}
}

func TestRunSignalDeath(t *testing.T) {
	for _, sig := range []syscall.Signal{unix.SIGHUP, unix.SIGINT, unix.SIGQUIT, unix.SIGABRT, unix.SIGKILL,
		unix.SIGUSR1, unix.SIGSEGV, unix.SIGPIPE, unix.SIGTERM} {
		t.Run(unix.SignalName(sig), func(t *testing.T) {
			res, err := Run(helperConfig(t, "signal", strconv.Itoa(int(sig))))
			require.NoError(t, err)
			assert.Equal(t, Result{ExitCode: 128 + int(sig), Signal: sig}, res)
		})
	}
}

func TestResultOf(t *testing.T) {
	tests := []struct {
		ws   syscall.WaitStatus
		want Result
	}{
		{0, Result{ExitCode: 0}},
		{1 << 8, Result{ExitCode: 1}},
		{255 << 8, Result{ExitCode: 255}},
		{2, Result{ExitCode: 130, Signal: syscall.SIGINT}},
		{9, Result{ExitCode: 137, Signal: syscall.SIGKILL}},
		{0x80 | 11, Result{ExitCode: 139, Signal: syscall.SIGSEGV}}, // core dumped
		{15, Result{ExitCode: 143, Signal: syscall.SIGTERM}},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, ResultOf(tt.ws), "wait status %#x", uint32(tt.ws))
	}
}

func TestRunStartErrors(t *testing.T) {
	dir := t.TempDir()
	noexec := filepath.Join(dir, "noexec")
	require.NoError(t, os.WriteFile(noexec, []byte("#!/bin/sh\n"), 0o644))
	badfmt := filepath.Join(dir, "badfmt")
	require.NoError(t, os.WriteFile(badfmt, []byte("\x7fELF garbage"), 0o755))
	tests := []struct {
		name, path string
		env        []string
		code       int
		sentinel   error
	}{
		{"not in PATH", "ncclrun-no-such-command", nil, 127, ErrNotFound},
		{"missing path", filepath.Join(dir, "missing"), nil, 127, ErrNotFound},
		{"no exec bit", noexec, nil, 126, ErrNotExecutable},
		{"no exec bit in PATH", "noexec", []string{"PATH=" + dir}, 126, ErrNotExecutable},
		{"directory", dir, nil, 126, ErrNotExecutable},
		{"bad format", badfmt, nil, 126, ErrNotExecutable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Run(Config{Path: tt.path, Env: tt.env, Stdout: io.Discard, Stderr: io.Discard})
			var se *StartError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, tt.code, se.ExitCode())
			assert.ErrorIs(t, err, tt.sentinel)
			assert.NotContains(t, err.Error(), "\n")
		})
	}
}

func TestRunRelayBinaryExact(t *testing.T) {
	const n = 3<<20 + 12345
	var out, errOut bytes.Buffer
	cfg := helperConfig(t, "random", strconv.Itoa(n), "42")
	cfg.Stdout, cfg.Stderr = &out, &errOut
	var lines int
	cfg.Tap = lineTap{line: func(Stream, []byte) { lines++ }}
	res, err := Run(cfg)
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode)
	assert.Equal(t, sha256.Sum256(randomBytes(n, 42)), sha256.Sum256(out.Bytes()), "stdout differs")
	assert.Equal(t, sha256.Sum256(randomBytes(n, 43)), sha256.Sum256(errOut.Bytes()), "stderr differs")
	assert.Positive(t, lines)
}

func TestRunPartialLineUnbuffered(t *testing.T) {
	pr, pw := io.Pipe()
	stdinR, stdinW := io.Pipe()
	cfg := helperConfig(t, "partial")
	cfg.Stdout, cfg.Stdin = pw, stdinR
	done := runAsync(cfg)
	want := "progress 10%\r"
	got := make([]byte, len(want))
	_, err := io.ReadFull(pr, got) // arrives while the child still waits on stdin
	require.NoError(t, err)
	assert.Equal(t, want, string(got))
	var rest bytes.Buffer
	copied := make(chan struct{})
	go func() { _, _ = io.Copy(&rest, pr); close(copied) }()
	stdinW.Close()
	r := <-done
	pw.Close()
	<-copied
	require.NoError(t, r.err)
	assert.Equal(t, 0, r.res.ExitCode)
	assert.Equal(t, "done\n", rest.String())
}

func TestRunStdin(t *testing.T) {
	for _, name := range []string{"reader", "file"} {
		t.Run(name, func(t *testing.T) {
			in := strings.Repeat("hello stdin\n", 10000)
			cfg := helperConfig(t, "echo")
			if name == "file" {
				f := filepath.Join(t.TempDir(), "in")
				require.NoError(t, os.WriteFile(f, []byte(in), 0o600))
				fh, err := os.Open(f)
				require.NoError(t, err)
				defer fh.Close()
				cfg.Stdin = fh
			} else {
				cfg.Stdin = strings.NewReader(in)
			}
			var out bytes.Buffer
			cfg.Stdout = &out
			res, err := Run(cfg)
			require.NoError(t, err)
			assert.Equal(t, 0, res.ExitCode)
			assert.Equal(t, in, out.String())
		})
	}
}

func TestRunForwardsTERM(t *testing.T) {
	out := newWatchBuf()
	cfg := helperConfig(t, "trap-term")
	cfg.Stdout = out
	done := runAsync(cfg)
	out.waitFor("ready\n")
	require.NoError(t, unix.Kill(os.Getpid(), unix.SIGTERM))
	r := <-done
	require.NoError(t, r.err)
	assert.Equal(t, Result{ExitCode: 0}, r.res)
	assert.Equal(t, "ready\ngot TERM\n", out.String())
}

func TestRunKillsTreeAfterKillAfter(t *testing.T) {
	out := newWatchBuf()
	cfg := helperConfig(t, "tree")
	cfg.Stdout = out
	cfg.KillAfter = 200 * time.Millisecond
	done := runAsync(cfg)
	s := out.waitFor("\n")
	fields := strings.Fields(s)
	require.Len(t, fields, 4, "helper said %q", s)
	var workers []int
	for _, f := range fields[1:] {
		pid, err := strconv.Atoi(f)
		require.NoError(t, err)
		workers = append(workers, pid)
		sid, err := unix.Getsid(pid)
		require.NoError(t, err)
		require.Equal(t, pid, sid, "worker %d leads its own session", pid)
	}
	require.NoError(t, unix.Kill(os.Getpid(), unix.SIGTERM))
	r := <-done
	require.NoError(t, r.err)
	assert.Equal(t, Result{ExitCode: 137, Signal: unix.SIGKILL}, r.res)
	for _, pid := range workers {
		assert.ErrorIs(t, unix.Kill(pid, 0), unix.ESRCH, "worker %d still exists", pid)
	}
	ds, err := descendants("/proc", os.Getpid())
	require.NoError(t, err)
	assert.Empty(t, ds)
}

func TestRunReapsOrphansAsSubreaper(t *testing.T) {
	var out bytes.Buffer
	cfg := helperConfig(t, "orphans")
	cfg.Stdout = &out
	res, err := Run(cfg)
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode)
	leaf, err := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(out.String()), "leaf "))
	require.NoError(t, err, "helper said %q", out.String())
	assert.ErrorIs(t, unix.Kill(leaf, 0), unix.ESRCH, "orphan %d was not reaped", leaf)
	ds, err := descendants("/proc", os.Getpid())
	require.NoError(t, err)
	assert.Empty(t, ds, "no zombie or process left")
}

func TestRunReapsOrphansAsPID1(t *testing.T) {
	testutil.RequireRoot(t)
	unshare := testutil.RequireTool(t, "unshare")
	self, err := os.Executable()
	require.NoError(t, err)
	spec, _ := json.Marshal(launchSpec{Path: self, Helper: "orphans", PID1: true})
	c := exec.Command(unshare, "--pid", "--fork", "--mount-proc", self)
	c.Env = append(os.Environ(), helperEnv+"=launch", "NCCLRUN_TEST_LAUNCH="+string(spec))
	b, err := c.Output()
	require.NoError(t, err, "output %q", b)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	require.Len(t, lines, 2, "output %q", b)
	assert.Regexp(t, `^leaf \d+$`, lines[0])
	var rep pid1Report
	require.NoError(t, json.Unmarshal([]byte(lines[1]), &rep))
	assert.Equal(t, pid1Report{PID: 1, Exit: 0, Zombies: 0}, rep)
}

func TestRunTap(t *testing.T) {
	type line struct {
		s Stream
		l string
	}
	var got []line
	cfg := helperConfig(t, "lines")
	var out bytes.Buffer
	cfg.Stdout = &out
	cfg.Tap = lineTap{line: func(s Stream, l []byte) { got = append(got, line{s, string(l)}) }}
	res, err := Run(cfg)
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode)
	long := strings.Repeat("x", 200<<10)
	assert.Equal(t, "a\n"+long+"\nb\ntail", out.String(), "the relay is never cut")
	var stdout, stderr []string
	for _, l := range got {
		if l.s == Stdout {
			stdout = append(stdout, l.l)
		} else {
			stderr = append(stderr, l.l)
		}
	}
	assert.Equal(t, []string{"a", long[:MaxLine], "b", "tail"}, stdout)
	assert.Equal(t, []string{"err1"}, stderr)
	assert.Zero(t, res.TapShed)
	assert.Zero(t, res.TapLost)
}

func TestRunSlowTapNeverBlocksRelay(t *testing.T) {
	const n = 8 << 20
	cw := &countWriter{want: 2 * n, full: make(chan struct{})}
	cfg := helperConfig(t, "random", strconv.Itoa(n), "7")
	cfg.Stdout, cfg.Stderr = cw, cw
	var once sync.Once
	cfg.Tap = lineTap{line: func(Stream, []byte) {
		once.Do(func() { <-cw.full }) // the tap stalls until the relay has delivered everything
	}}
	res, err := Run(cfg)
	require.NoError(t, err)
	assert.Equal(t, 0, res.ExitCode)
	assert.Equal(t, 2*n, cw.n)
	lines := bytes.Count(randomBytes(n, 7), newline) + bytes.Count(randomBytes(n, 8), newline)
	assert.Positive(t, res.TapLost, "a stalled tap loses lines that are not noise, counted")
	assert.Less(t, res.TapLost, int64(lines))
	assert.Zero(t, res.TapShed, "no line is noise here")
}

func TestRunPTYWhenOutputIsTerminal(t *testing.T) {
	outer, err := openPTY(os.Stdin) // the "terminal" ncclrun writes to
	require.NoError(t, err)
	defer outer.master.Close()
	defer outer.slave.Close()
	require.NoError(t, withFd(outer.master, func(fd int) {
		_ = unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Row: 33, Col: 101})
	}))
	var got bytes.Buffer
	copied := make(chan struct{})
	go func() { _, _ = io.Copy(&got, outer.master); close(copied) }()

	cfg := helperConfig(t, "report")
	cfg.Stdout = outer.slave
	var errOut bytes.Buffer
	cfg.Stderr = &errOut
	res, err := Run(cfg)
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode)

	cfg = helperConfig(t, "write", "line1\nprog 1%\rprog 2%\r")
	cfg.Stdout = outer.slave
	res, err = Run(cfg)
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode)
	outer.slave.Close()
	<-copied

	first, rest, ok := strings.Cut(got.String(), "\n")
	require.True(t, ok, "got %q", got.String())
	var r report
	require.NoError(t, json.Unmarshal([]byte(first), &r), "got %q", first)
	assert.Equal(t, [3]bool{false, true, false}, r.TTY, "stdout is a terminal, stdin and stderr pipes")
	assert.Equal(t, [2]uint16{33, 101}, [2]uint16{r.Rows, r.Cols}, "window size copied")
	assert.Equal(t, "line1\nprog 1%\rprog 2%\r", rest, "no output processing: bytes as written")
}

func TestRunUser(t *testing.T) {
	testutil.RequireRoot(t)
	bin := publicCopy(t)
	tests := []struct {
		user string
		want func() User
	}{
		{"1000:1000", func() User { return User{UID: 1000, GID: 1000, Groups: []uint32{1000}} }},
		{"nobody", func() User { c, _ := ResolveUser("nobody"); return c }},
	}
	for _, tt := range tests {
		t.Run(tt.user, func(t *testing.T) {
			want := tt.want()
			if want.UID == 0 {
				t.Skipf("no user %q here", tt.user)
			}
			cfg := helperConfig(t, "report")
			cfg.Path = bin
			u, err := ResolveUser(tt.user)
			require.NoError(t, err)
			cfg.User = &u
			r, _ := runReport(t, cfg)
			var groups []string
			for _, g := range want.Groups {
				groups = append(groups, strconv.Itoa(int(g)))
			}
			assert.Equal(t, strconv.Itoa(int(want.UID)), r.UID)
			assert.Equal(t, strconv.Itoa(int(want.GID)), r.GID)
			assert.Equal(t, strings.Join(groups, " "), r.Groups)
			assert.Zero(t, r.CapEff|r.CapPrm|r.CapAmb, "a non-root child holds no capability")
		})
	}
}

// publicCopy copies the test binary into a directory any user may read,
// on the root filesystem (not nosuid), and returns the copy's path.
func publicCopy(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "ncclrun-launcher-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	self, err := os.Executable()
	require.NoError(t, err)
	b, err := os.ReadFile(self)
	require.NoError(t, err)
	p := filepath.Join(dir, "helper")
	require.NoError(t, os.WriteFile(p, b, 0o755))
	return p
}

// runLaunch runs the "launch" helper at bin with spec under the wrapper
// command (prlimit, setpriv, ...) and returns its output.
func runLaunch(t *testing.T, wrapper []string, bin string, spec launchSpec) string {
	t.Helper()
	b, err := json.Marshal(spec)
	require.NoError(t, err)
	argv := append(append([]string{}, wrapper...), bin)
	c := exec.Command(argv[0], argv[1:]...)
	c.Env = append(os.Environ(), helperEnv+"=launch", "NCCLRUN_TEST_LAUNCH="+string(b))
	out, _ := c.CombinedOutput()
	return string(out)
}

func TestRunAmbientIPCLockHandOff(t *testing.T) {
	testutil.RequireRoot(t)
	setcap := testutil.RequireTool(t, "setcap")
	setpriv := testutil.RequireTool(t, "setpriv")
	prlimit := testutil.RequireTool(t, "prlimit")
	child := publicCopy(t)  // plain: file capabilities would clear the ambient set
	parent := publicCopy(t) // cap_ipc_lock+p, like a setcap'd ncclrun
	plain := publicCopy(t)
	out, err := exec.Command(setcap, "cap_ipc_lock+p", parent).CombinedOutput()
	require.NoError(t, err, "setcap: %s", out)
	wrapper := []string{prlimit, "--memlock=65536:65536", setpriv, "--reuid", "1000", "--regid", "1000", "--clear-groups", "--"}
	const mib16 = 16 << 20
	ipc := uint64(1) << capIPCLock

	t.Run("ambient", func(t *testing.T) {
		s := runLaunch(t, wrapper, parent, launchSpec{Path: child, Helper: "report", Args: []string{strconv.Itoa(mib16)}, Ambient: true})
		var r report
		require.NoError(t, json.Unmarshal([]byte(s), &r), "output %q", s)
		assert.Equal(t, "1000", r.UID)
		assert.Equal(t, rlimit.Limit{Soft: 65536, Hard: 65536}, r.Memlock)
		assert.Equal(t, ipc, r.CapEff, "CAP_IPC_LOCK and nothing else is effective")
		assert.Equal(t, ipc, r.CapPrm)
		assert.Equal(t, ipc, r.CapAmb)
		assert.Empty(t, r.MlockErr, "mlock of 16 MiB past a 64 KiB limit")
	})
	t.Run("without", func(t *testing.T) {
		s := runLaunch(t, wrapper, parent, launchSpec{Path: child, Helper: "report", Args: []string{strconv.Itoa(mib16)}})
		var r report
		require.NoError(t, json.Unmarshal([]byte(s), &r), "output %q", s)
		assert.Zero(t, r.CapEff|r.CapPrm|r.CapAmb)
		assert.Equal(t, "ENOMEM", r.MlockErr)
	})
	t.Run("not permitted", func(t *testing.T) {
		s := runLaunch(t, wrapper, plain, launchSpec{Path: child, Helper: "report", Ambient: true})
		assert.Contains(t, s, "launch-error: code=0 noipclock=true")
	})
}

func TestRunTrampolineDropCapsAndMemlock(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireCap(t, unix.CAP_SETPCAP)
	ipc := uint64(1) << capIPCLock
	t.Run("root", func(t *testing.T) {
		cfg := helperConfig(t, "report", strconv.Itoa(16<<20))
		cfg.DropCaps = []string{"IPC_LOCK"}
		cfg.Memlock = &rlimit.Limit{Soft: 65536, Hard: 65536}
		r, out := runReport(t, cfg)
		assert.Zero(t, (r.CapEff|r.CapPrm|r.CapInh|r.CapBnd|r.CapAmb)&ipc, "IPC_LOCK in no set")
		assert.NotZero(t, r.CapEff&(1<<unix.CAP_SYS_ADMIN), "other capabilities stay")
		assert.Equal(t, rlimit.Limit{Soft: 65536, Hard: 65536}, r.Memlock)
		assert.Equal(t, "ENOMEM", r.MlockErr)
		assert.NotContains(t, out, trampolineEnv)
	})
	t.Run("user with ambient", func(t *testing.T) {
		cfg := helperConfig(t, "report", strconv.Itoa(16<<20))
		cfg.Path = publicCopy(t)
		cfg.User = &User{UID: 1000, GID: 1000, Groups: []uint32{1000}}
		cfg.AmbientIPCLock = true
		cfg.DropCaps = []string{"CAP_SYS_ADMIN"}
		cfg.Memlock = &rlimit.Limit{Soft: 65536, Hard: 65536}
		r, _ := runReport(t, cfg)
		assert.Equal(t, "1000", r.UID)
		assert.Equal(t, ipc, r.CapEff)
		assert.Equal(t, ipc, r.CapPrm)
		assert.Equal(t, ipc, r.CapAmb)
		assert.Zero(t, r.CapBnd&(1<<unix.CAP_SYS_ADMIN))
		assert.Empty(t, r.MlockErr)
	})
	t.Run("exec failure reported", func(t *testing.T) {
		bad := filepath.Join(t.TempDir(), "bad")
		require.NoError(t, os.WriteFile(bad, []byte("\x00\x01not a program"), 0o755))
		_, err := Run(Config{Path: bad, DropCaps: []string{"IPC_LOCK"}, Stdout: io.Discard, Stderr: io.Discard})
		var se *StartError
		require.ErrorAs(t, err, &se)
		assert.Equal(t, 126, se.ExitCode())
		assert.ErrorIs(t, err, unix.ENOEXEC)
	})
	t.Run("unknown capability", func(t *testing.T) {
		_, err := Run(Config{Path: "true", DropCaps: []string{"IPC_LOKC"}})
		assert.ErrorIs(t, err, ErrCapability)
	})
}

func TestExec(t *testing.T) {
	self, err := os.Executable()
	require.NoError(t, err)
	t.Run("plain", func(t *testing.T) {
		s := runLaunch(t, nil, self, launchSpec{Path: self, Helper: "write", Args: []string{"replaced\n"}, Exec: true})
		assert.Equal(t, "replaced\n", s)
	})
	t.Run("not found", func(t *testing.T) {
		s := runLaunch(t, nil, self, launchSpec{Path: "ncclrun-no-such-command", Exec: true})
		assert.Contains(t, s, "launch-error: code=127")
	})
	t.Run("drop caps and memlock", func(t *testing.T) {
		testutil.RequireRoot(t)
		s := runLaunch(t, nil, self, launchSpec{Path: self, Helper: "report", Args: []string{strconv.Itoa(16 << 20)},
			Exec: true, Drop: []string{"IPC_LOCK"}, Memlock: &rlimit.Limit{Soft: 65536, Hard: 65536}})
		var r report
		require.NoError(t, json.Unmarshal([]byte(s), &r), "output %q", s)
		assert.Zero(t, (r.CapEff|r.CapPrm|r.CapBnd|r.CapAmb)&(1<<capIPCLock))
		assert.Equal(t, rlimit.Limit{Soft: 65536, Hard: 65536}, r.Memlock)
		assert.Equal(t, "ENOMEM", r.MlockErr)
	})
}

func TestRaiseMemlock(t *testing.T) {
	prlimit := testutil.RequireTool(t, "prlimit")
	self, err := os.Executable()
	require.NoError(t, err)
	s := runLaunch(t, []string{prlimit, "--memlock=65536:1048576", "--"}, self, launchSpec{RaiseMemlock: true})
	var got struct {
		Before, After rlimit.Limit
		HardEPERM     bool `json:"hard_eperm"`
		HardErr       bool `json:"hard_err"`
	}
	require.NoError(t, json.Unmarshal([]byte(s), &got), "output %q", s)
	assert.Equal(t, rlimit.Limit{Soft: 65536, Hard: 1048576}, got.Before)
	if got.HardErr {
		assert.True(t, got.HardEPERM, "hard raise refused with EPERM")
		assert.Equal(t, rlimit.Limit{Soft: 1048576, Hard: 1048576}, got.After, "soft raised to hard")
	} else {
		assert.Equal(t, rlimit.Limit{Soft: -1, Hard: -1}, got.After, "CAP_SYS_RESOURCE: unlimited")
	}
}

// runReport runs a "report" helper under cfg, requires a clean exit and
// returns what it reported, with its raw output.
func runReport(t *testing.T, cfg Config) (report, string) {
	t.Helper()
	var out bytes.Buffer
	cfg.Stdout = &out
	res, err := Run(cfg)
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode)
	var r report
	require.NoError(t, json.Unmarshal(out.Bytes(), &r), "got %q", out.String())
	return r, out.String()
}

// TestRunEnvDuplicatesLastWins: a name set twice in Config.Env reaches the
// child once, with the last value (internal/environ's rule, exec.Cmd.Env's),
// with the plain start and through the trampoline.
func TestRunEnvDuplicatesLastWins(t *testing.T) {
	for _, tc := range []struct {
		name    string
		memlock *rlimit.Limit
	}{{"plain", nil}, {"trampoline", &rlimit.Limit{Soft: -1, Hard: -1}}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := helperConfig(t, "environ")
			cfg.Env = append([]string{"NCCLRUN_DUP=first"}, append(cfg.Env, "NCCLRUN_DUP=last")...)
			if tc.memlock != nil {
				l, err := rlimit.Get(rlimit.Memlock)
				require.NoError(t, err)
				cfg.Memlock = &l // the trampoline, with the limit as it is
			}
			var out bytes.Buffer
			cfg.Stdout = &out
			res, err := Run(cfg)
			require.NoError(t, err)
			require.Equal(t, 0, res.ExitCode)
			var dups []string
			for _, kv := range strings.Split(out.String(), "\n") {
				if strings.HasPrefix(kv, "NCCLRUN_DUP=") {
					dups = append(dups, kv)
				}
			}
			assert.Equal(t, []string{"NCCLRUN_DUP=last"}, dups)
		})
	}
}
