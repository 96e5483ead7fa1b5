package launcher

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ncclrun/ncclrun/internal/caps"
	"github.com/ncclrun/ncclrun/internal/environ"
	"github.com/ncclrun/ncclrun/internal/rlimit"
)

// trampolineEnv carries a trampolineSpec (JSON) to ncclrun re-executed as
// the trampoline. MaybeTrampoline removes it before the real command runs.
const trampolineEnv = "NCCLRUN_TRAMPOLINE"

// trampolineSpec is what the trampoline applies before it execs Path.
type trampolineSpec struct {
	Path    string        `json:"path"` // resolved command
	Argv    []string      `json:"argv"`
	Drop    uint64        `json:"drop,omitempty"` // capability mask to remove from every set
	Memlock *rlimit.Limit `json:"memlock,omitempty"`
	User    *User         `json:"user,omitempty"`
	Ambient bool          `json:"ambient,omitempty"` // raise CAP_IPC_LOCK into the ambient set
	// StatusFD, when > 0, is a pipe on which a failure is reported to the
	// supervising ncclrun as a trampolineFailure; a successful exec closes it.
	StatusFD int `json:"status_fd,omitempty"`
}

// trampolineFailure is what the trampoline reports when it cannot exec.
type trampolineFailure struct {
	Stage string `json:"stage"` // "spec", "memlock", "bounding", "user", "capset", "ambient", "exec"
	Errno int    `json:"errno"`
	Msg   string `json:"msg"`
}

// stageError is an error of one step of applyAndExec.
type stageError struct {
	stage string
	err   error
}

func (e *stageError) Error() string { return e.err.Error() }
func (e *stageError) Unwrap() error { return e.err }

// MaybeTrampoline must be the first call in ncclrun's main. When ncclrun
// was re-executed as the trampoline of Run (the NCCLRUN_TRAMPOLINE variable
// is set), it applies the requested memlock limit, capability drops (the
// bounding set too, which Go's fork path cannot do), user and ambient
// CAP_IPC_LOCK on one locked OS thread and execs the real command with the
// real environment; it never returns then. If that fails it reports the
// failure to the supervising ncclrun (or, without one, prints one line
// starting with "ncclrun: " to stderr) and exits 127 or 126: this is the
// only place where the package prints or exits, because it runs in the
// child. Without the variable it returns at once.
func MaybeTrampoline() {
	v, ok := os.LookupEnv(trampolineEnv)
	if !ok {
		return
	}
	env := environ.Without(Environ(), trampolineEnv)
	var spec trampolineSpec
	if err := json.Unmarshal([]byte(v), &spec); err != nil {
		trampolineExit(spec, &stageError{"spec", fmt.Errorf("%s: %w", trampolineEnv, err)})
	}
	if spec.StatusFD > 0 {
		unix.CloseOnExec(spec.StatusFD)
	}
	if spec.Path == "" || len(spec.Argv) == 0 {
		// ncclrun always sends both; a hand-made spec may not.
		trampolineExit(spec, &stageError{"spec", fmt.Errorf("%s: no command (path and argv are required)", trampolineEnv)})
	}
	trampolineExit(spec, applyAndExec(spec, env))
}

func trampolineExit(spec trampolineSpec, err error) {
	f := trampolineFailure{Stage: "spec", Msg: err.Error()}
	var se *stageError
	if errors.As(err, &se) {
		f.Stage = se.stage
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		f.Errno = int(errno)
	}
	code := 126
	var st *StartError
	if errors.As(err, &st) {
		f.Stage = "exec"
		code = st.ExitCode()
	}
	if spec.StatusFD > 0 {
		b, _ := json.Marshal(f)
		_, _ = unix.Write(spec.StatusFD, b)
	} else {
		fmt.Fprintf(os.Stderr, "ncclrun: %v\n", err)
	}
	os.Exit(code)
}

// applyAndExec applies spec to this process and execs spec.Path with env.
// Capabilities and ids are per thread, so everything happens on one locked
// OS thread with raw system calls, and the execve is issued from it (the
// kernel takes the credentials of the thread that execs). It returns only
// on failure, and the process may then be half changed: the caller must
// exit. Order as runc's: limits, bounding set, user (keeping capabilities
// across setuid), capability sets, ambient set, exec.
func applyAndExec(spec trampolineSpec, env []string) error {
	runtime.LockOSThread() // never unlocked: this thread execs or the process exits
	if spec.Memlock != nil {
		if err := rlimit.Set(rlimit.Memlock, *spec.Memlock); err != nil {
			return &stageError{"memlock", err}
		}
	}
	for c := 0; c < 64; c++ {
		if spec.Drop&(1<<uint(c)) == 0 || !caps.InBounding(c) {
			continue
		}
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
			// Without CAP_SETPCAP a non-root process cannot shrink its
			// bounding set; it holds nothing it could pass on through it
			// except by executing a file with capabilities.
			if errEPERM(err) && unix.Geteuid() != 0 {
				continue
			}
			return &stageError{"bounding", fmt.Errorf("%w: drop %s from the bounding set: %w", ErrCapability, caps.Name(c), err)}
		}
	}
	toNonRoot := spec.User != nil && spec.User.UID != 0
	if spec.User != nil {
		if err := switchUser(*spec.User); err != nil {
			return &stageError{"user", fmt.Errorf("%w: uid %d gid %d: %w", ErrUser, spec.User.UID, spec.User.GID, err)}
		}
	}
	cur, err := caps.Get()
	if err != nil {
		return &stageError{"capset", err}
	}
	keep := ^spec.Drop
	next := caps.Sets{Effective: cur.Effective & keep, Permitted: cur.Permitted & keep, Inheritable: cur.Inheritable & keep}
	ipc := uint64(1) << caps.IPCLock
	ambient := spec.Ambient && keep&ipc != 0
	if toNonRoot {
		// What a non-root command may keep: CAP_IPC_LOCK, if asked for.
		var allow uint64
		if ambient {
			allow = ipc
		}
		next = caps.Sets{Effective: next.Permitted & allow, Permitted: next.Permitted & allow, Inheritable: next.Permitted & allow}
	}
	if ambient {
		if next.Permitted&ipc == 0 {
			return &stageError{"ambient", fmt.Errorf("start with ambient CAP_IPC_LOCK: %w", ErrNoIPCLock)}
		}
		next.Inheritable |= ipc
	}
	if err := caps.Set(next); err != nil {
		return &stageError{"capset", fmt.Errorf("%w: %w", ErrCapability, err)}
	}
	for c := 0; c < 64; c++ {
		if spec.Drop&(1<<uint(c)) != 0 {
			_ = unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_LOWER, uintptr(c), 0, 0)
		}
	}
	if ambient {
		if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_RAISE, caps.IPCLock, 0, 0); err != nil {
			return &stageError{"ambient", fmt.Errorf("%w: raise ambient CAP_IPC_LOCK: %w", ErrCapability, err)}
		}
	}
	err = syscall.Exec(spec.Path, spec.Argv, env)
	return execError(spec.Argv[0], spec.Path, err)
}

// switchUser sets groups, gid and uid of the calling thread only (raw
// system calls, not Go's all-threads setuid), keeping the permitted
// capabilities across the uid change so that caps.Set can still pick
// CAP_IPC_LOCK out of them.
func switchUser(c User) error {
	if err := unix.Prctl(unix.PR_SET_KEEPCAPS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("PR_SET_KEEPCAPS: %w", err)
	}
	var p unsafe.Pointer
	if len(c.Groups) > 0 {
		p = unsafe.Pointer(&c.Groups[0])
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, uintptr(len(c.Groups)), uintptr(p), 0); e != 0 {
		return fmt.Errorf("setgroups: %w", e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(c.GID), uintptr(c.GID), uintptr(c.GID)); e != 0 {
		return fmt.Errorf("setresgid: %w", e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(c.UID), uintptr(c.UID), uintptr(c.UID)); e != 0 {
		return fmt.Errorf("setresuid: %w", e)
	}
	if err := unix.Prctl(unix.PR_SET_KEEPCAPS, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("PR_SET_KEEPCAPS: %w", err)
	}
	return nil
}

// failureError turns what a trampoline reported into Run's error.
func failureError(path, resolved string, f trampolineFailure) error {
	errno := syscall.Errno(f.Errno)
	if f.Stage == "exec" {
		return execError(path, resolved, errno)
	}
	sentinel := ErrCapability
	switch f.Stage {
	case "user":
		sentinel = ErrUser
	case "ambient":
		sentinel = ErrNoIPCLock
	case "memlock":
		sentinel = ErrMemlock
	case "spec":
		sentinel = errors.New("trampoline")
	}
	if f.Errno != 0 {
		// f.Msg already ends with the errno's text: wrap it without
		// saying it twice.
		return fmt.Errorf("start %q: %w: %w", path, sentinel, &errnoMessage{f.Msg, errno})
	}
	return fmt.Errorf("start %q: %w: %s", path, sentinel, f.Msg)
}

// errnoMessage is a message that already names its errno, which it unwraps to.
type errnoMessage struct {
	msg   string
	errno syscall.Errno
}

func (e *errnoMessage) Error() string { return e.msg }
func (e *errnoMessage) Unwrap() error { return e.errno }
