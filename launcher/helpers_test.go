//go:build linux

package launcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ncclrun/ncclrun/internal/environ"
	"github.com/ncclrun/ncclrun/internal/rlimit"
	"github.com/ncclrun/ncclrun/internal/testutil"
)

// The test binary doubles as the helper processes the tests supervise:
// NCCLRUN_LAUNCHER_HELPER names the behaviour, os.Args[1:] its arguments.
const helperEnv = "NCCLRUN_LAUNCHER_HELPER"

func TestMain(m *testing.M) {
	MaybeTrampoline()
	if name := os.Getenv(helperEnv); name != "" {
		fn, ok := helpers[name]
		if !ok {
			fmt.Fprintf(os.Stderr, "unknown helper %q\n", name)
			os.Exit(98)
		}
		os.Unsetenv(helperEnv)
		fn(os.Args[1:])
		os.Exit(0)
	}
	testutil.UnignoreSignals()
	os.Exit(m.Run())
}

var helpers = map[string]func(args []string){
	"exit": func(a []string) { os.Exit(atoi(a[0])) },
	"signal": func(a []string) {
		sig := syscall.Signal(atoi(a[0]))
		_ = unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{})
		setDefaultAction(sig)
		_ = unix.Kill(os.Getpid(), sig)
		hang()
	},
	"trap-term": func([]string) {
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGTERM)
		os.Stdout.WriteString("ready\n")
		<-ch
		os.Stdout.WriteString("got TERM\n")
	},
	"partial": func([]string) {
		os.Stdout.WriteString("progress 10%\r")
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Stdout.WriteString("done\n")
	},
	"echo":    func([]string) { _, _ = io.Copy(os.Stdout, os.Stdin) },
	"write":   func(a []string) { os.Stdout.WriteString(a[0]) },
	"environ": func([]string) { os.Stdout.WriteString(strings.Join(os.Environ(), "\n") + "\n") },
	"random": func(a []string) {
		n, seed := atoi(a[0]), int64(atoi(a[1]))
		var wg sync.WaitGroup
		for i, f := range []*os.File{os.Stdout, os.Stderr} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				data := randomBytes(n, seed+int64(i))
				sizes := rand.New(rand.NewSource(seed))
				for len(data) > 0 {
					k := min(len(data), 1+sizes.Intn(70000))
					if _, err := f.Write(data[:k]); err != nil {
						os.Exit(97)
					}
					data = data[k:]
				}
			}()
		}
		wg.Wait()
	},
	"pipe-size": func([]string) {
		n, err := unix.FcntlInt(1, unix.F_GETPIPE_SZ, 0)
		fmt.Println(n, err)
	},
	"lines": func([]string) {
		os.Stdout.WriteString("a\n" + strings.Repeat("x", 200<<10) + "\nb\ntail")
		os.Stderr.WriteString("err1\n")
	},
	"report": func(a []string) {
		r := selfReport()
		if len(a) > 0 {
			r.MlockErr = tryMlock(atoi(a[0]))
		}
		b, _ := json.Marshal(r)
		os.Stdout.Write(append(b, '\n'))
	},
	// tree: a torchrun-like parent that ignores SIGTERM, with three workers,
	// each in a session of its own, ignoring SIGTERM too.
	"tree": func([]string) {
		signal.Ignore(syscall.SIGTERM)
		r, w, err := os.Pipe()
		must(err)
		var pids []string
		for i := 0; i < 3; i++ {
			c := helperCmd("worker")
			c.ExtraFiles = []*os.File{w}
			c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			must(c.Start())
			pids = append(pids, strconv.Itoa(c.Process.Pid))
		}
		w.Close()
		b := make([]byte, 3)
		_, err = io.ReadFull(r, b)
		must(err)
		os.Stdout.WriteString("workers " + strings.Join(pids, " ") + "\n")
		hang()
	},
	"worker": func([]string) {
		signal.Ignore(syscall.SIGTERM)
		f := os.NewFile(3, "ready")
		f.Write([]byte{1})
		f.Close()
		hang()
	},
	// orphans: make a grandchild that is orphaned (its parent exits at
	// once) and exits; wait until it has exited, then exit.
	"orphans": func([]string) {
		r, w, err := os.Pipe()
		must(err)
		mid := helperCmd("orphan-mid")
		mid.ExtraFiles = []*os.File{w}
		must(mid.Start())
		w.Close()
		must(mid.Wait())
		b, err := io.ReadAll(r) // EOF: the leaf has closed its files (it is exiting)
		must(err)
		leaf := atoi(strings.TrimSpace(string(b)))
		if fd, err := unix.PidfdOpen(leaf, 0); err == nil {
			pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			for {
				if _, err := unix.Poll(pfd, -1); err != unix.EINTR {
					break
				}
			}
		}
		fmt.Printf("leaf %d\n", leaf)
	},
	"orphan-mid": func([]string) {
		leaf := helperCmd("orphan-leaf")
		leaf.ExtraFiles = []*os.File{os.NewFile(3, "w")}
		must(leaf.Start())
		os.Exit(0) // without waiting: the leaf is orphaned
	},
	"orphan-leaf": func([]string) {
		f := os.NewFile(3, "w")
		fmt.Fprintf(f, "%d\n", os.Getpid())
	},
	// launch: call Run (or Exec) with the launchSpec in NCCLRUN_TEST_LAUNCH
	// and exit as the child did; "launch-error: ..." and 99 on an error.
	"launch": func([]string) {
		var ls launchSpec
		must(json.Unmarshal([]byte(os.Getenv("NCCLRUN_TEST_LAUNCH")), &ls))
		cfg := ls.config()
		if ls.Exec {
			err := Exec(cfg)
			fmt.Printf("launch-error: %s\n", describeErr(err))
			os.Exit(99)
		}
		if ls.RaiseMemlock {
			mc, err := RaiseMemlock()
			must(err)
			b, _ := json.Marshal(map[string]any{"before": mc.Before, "after": mc.After, "hard_eperm": mc.HardErr != nil && isEPERM(mc.HardErr), "hard_err": mc.HardErr != nil})
			os.Stdout.Write(append(b, '\n'))
			return
		}
		res, err := Run(cfg)
		if err != nil {
			fmt.Printf("launch-error: %s\n", describeErr(err))
			os.Exit(99)
		}
		if ls.PID1 {
			b, _ := json.Marshal(pid1Report{PID: os.Getpid(), Exit: res.ExitCode, Zombies: zombies()})
			os.Stdout.Write(append(b, '\n'))
			return
		}
		os.Exit(res.ExitCode)
	},
}

// launchSpec is what the "launch" helper runs.
type launchSpec struct {
	Path         string        `json:"path"`
	Helper       string        `json:"helper"`
	Args         []string      `json:"args"`
	User         string        `json:"user"`
	Ambient      bool          `json:"ambient"`
	Drop         []string      `json:"drop"`
	Memlock      *rlimit.Limit `json:"memlock"`
	Exec         bool          `json:"exec"`
	PID1         bool          `json:"pid1"`
	RaiseMemlock bool          `json:"raise_memlock"`
}

func (ls launchSpec) config() Config {
	env := append(environ.Without(os.Environ(), "NCCLRUN_TEST_LAUNCH"), helperEnv+"="+ls.Helper)
	cfg := Config{Path: ls.Path, Args: ls.Args, Env: env, Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
		AmbientIPCLock: ls.Ambient, DropCaps: ls.Drop, Memlock: ls.Memlock, KillAfter: 5 * time.Second}
	if ls.User != "" {
		u, err := ResolveUser(ls.User)
		must(err)
		cfg.User = &u
	}
	return cfg
}

type pid1Report struct {
	PID     int `json:"pid"`
	Exit    int `json:"exit"`
	Zombies int `json:"zombies"`
}

// report is what the "report" helper prints about itself.
type report struct {
	UID, GID                       string
	Groups                         string
	CapInh, CapPrm, CapEff, CapBnd uint64
	CapAmb                         uint64
	Memlock                        rlimit.Limit
	TTY                            [3]bool
	Rows, Cols                     uint16
	MlockErr                       string
}

func selfReport() report {
	var r report
	b, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, ":")
		v = strings.TrimSpace(v)
		hex := func() uint64 { n, _ := strconv.ParseUint(v, 16, 64); return n }
		switch k {
		case "Uid":
			r.UID = strings.Fields(v)[0]
		case "Gid":
			r.GID = strings.Fields(v)[0]
		case "Groups":
			r.Groups = v
		case "CapInh":
			r.CapInh = hex()
		case "CapPrm":
			r.CapPrm = hex()
		case "CapEff":
			r.CapEff = hex()
		case "CapBnd":
			r.CapBnd = hex()
		case "CapAmb":
			r.CapAmb = hex()
		}
	}
	r.Memlock, _ = rlimit.Get(rlimit.Memlock)
	for i := 0; i < 3; i++ {
		_, err := unix.IoctlGetTermios(i, unix.TCGETS)
		r.TTY[i] = err == nil
	}
	if ws, err := unix.IoctlGetWinsize(1, unix.TIOCGWINSZ); err == nil {
		r.Rows, r.Cols = ws.Row, ws.Col
	}
	return r
}

func tryMlock(n int) string {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return "mmap: " + err.Error()
	}
	if err := unix.Mlock(b); err != nil {
		return unix.ErrnoName(err.(syscall.Errno))
	}
	return ""
}

func zombies() int {
	ps, _ := processTable("/proc")
	n := 0
	for _, p := range ps {
		if p.State == 'Z' {
			n++
		}
	}
	return n
}

func describeErr(err error) string {
	code := 0
	if e, ok := err.(interface{ ExitCode() int }); ok {
		code = e.ExitCode()
	}
	return fmt.Sprintf("code=%d noipclock=%v user=%v cap=%v: %v", code, errIs(err, ErrNoIPCLock), errIs(err, ErrUser), errIs(err, ErrCapability), err)
}

// setDefaultAction sets sig's disposition to SIG_DFL behind the Go
// runtime's back (rt_sigaction), so that kill(self, sig) kills the process
// the way it kills a C program.
func setDefaultAction(sig syscall.Signal) {
	var act [4]uint64 // handler, flags, restorer, mask: all zero = SIG_DFL
	_, _, _ = unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&act[0])), 0, 8, 0, 0)
}

func helperCmd(name string, args ...string) *exec.Cmd {
	self, _ := os.Executable()
	c := exec.Command(self, args...)
	c.Env = append(os.Environ(), helperEnv+"="+name)
	c.Stdout, c.Stderr = os.Stdout, os.Stderr
	return c
}

// helperRun is helperCmd for a test that reads the helper's output (not
// passed to the test's own) and kills it if it runs past limit.
func helperRun(t *testing.T, limit time.Duration, name string, args ...string) *exec.Cmd {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	t.Cleanup(cancel)
	self, _ := os.Executable()
	c := exec.CommandContext(ctx, self, args...)
	c.Env = append(os.Environ(), helperEnv+"="+name)
	return c
}

func randomBytes(n int, seed int64) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b)
	return b
}

func hang() {
	for {
		time.Sleep(time.Hour)
	}
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	must(err)
	return n
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(96)
	}
}

func errIs(err, target error) bool { return errors.Is(err, target) }

func isEPERM(err error) bool { return errors.Is(err, unix.EPERM) }
