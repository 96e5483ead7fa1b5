// Package caps names Linux capabilities, parses the capability masks of
// /proc/<pid>/status and reads and changes the calling thread's sets
// (capabilities(7)). It is the one place ncclrun keeps these: the launcher,
// preflight, cmd/ncclrun and the tests use it.
//
// Capabilities are per thread: Get and Set act on the calling OS thread, so
// a caller that changes them locks its goroutine to the thread first
// (runtime.LockOSThread) and only then calls Get and Set.
//
// Do not use it for file capabilities or for another process's sets.
package caps

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Capability numbers of include/uapi/linux/capability.h that ncclrun
// decides on.
const (
	SetGID      = 6
	SetUID      = 7
	IPCLock     = 14
	SysResource = 24
)

// names are the capability names of linux/capability.h without "CAP_",
// indexed by number.
var names = [...]string{
	"CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL",
	"SETGID", "SETUID", "SETPCAP", "LINUX_IMMUTABLE", "NET_BIND_SERVICE",
	"NET_BROADCAST", "NET_ADMIN", "NET_RAW", "IPC_LOCK", "IPC_OWNER",
	"SYS_MODULE", "SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT",
	"SYS_ADMIN", "SYS_BOOT", "SYS_NICE", "SYS_RESOURCE", "SYS_TIME",
	"SYS_TTY_CONFIG", "MKNOD", "LEASE", "AUDIT_WRITE", "AUDIT_CONTROL",
	"SETFCAP", "MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG", "WAKE_ALARM",
	"BLOCK_SUSPEND", "AUDIT_READ", "PERFMON", "BPF", "CHECKPOINT_RESTORE",
}

// ErrUnknown is wrapped by Parse's error for a name capability(7) does not list.
var ErrUnknown = errors.New("unknown capability")

// ErrMalformed is wrapped by ParseMask's error for text that is not a mask.
var ErrMalformed = errors.New("malformed capability mask")

// ErrUnsupported is returned by Get and Set where there are no Linux
// capabilities.
var ErrUnsupported = errors.New("capabilities need Linux")

// Normalize turns "cap_ipc_lock", "CAP_IPC_LOCK" or " ipc_lock" into
// "IPC_LOCK", whether or not such a capability exists.
func Normalize(name string) string {
	return strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(name)), "CAP_")
}

// Parse returns the number of a capability named like "IPC_LOCK",
// "CAP_IPC_LOCK" or "cap_ipc_lock". Errors wrap ErrUnknown.
func Parse(name string) (int, error) {
	n := Normalize(name)
	for i, c := range names {
		if c == n {
			return i, nil
		}
	}
	return 0, fmt.Errorf("%w %q", ErrUnknown, name)
}

// Name returns "CAP_IPC_LOCK" for 14, and "CAP_<n>" for a number this
// package has no name for.
func Name(c int) string {
	if c >= 0 && c < len(names) {
		return "CAP_" + names[c]
	}
	return "CAP_" + strconv.Itoa(c)
}

// Mask converts capability names (as Parse takes them) to a bit mask.
func Mask(names []string) (uint64, error) {
	var m uint64
	for _, n := range names {
		c, err := Parse(n)
		if err != nil {
			return 0, err
		}
		m |= 1 << uint(c)
	}
	return m, nil
}

// Has reports whether capability c is in mask.
func Has(mask uint64, c int) bool { return c >= 0 && c < 64 && mask&(1<<uint(c)) != 0 }

// ParseMask parses a capability mask as the kernel prints it in
// /proc/<pid>/status (CapInh, CapPrm, CapEff, CapBnd, CapAmb): up to 16 hex
// digits (fs/proc/array.c render_cap_t). Errors wrap ErrMalformed.
func ParseMask(s string) (uint64, error) {
	if s == "" || len(s) > 16 {
		return 0, fmt.Errorf("%w %q", ErrMalformed, s)
	}
	v, err := strconv.ParseUint(s, 16, 64)
	if err != nil {
		return 0, fmt.Errorf("%w %q", ErrMalformed, s)
	}
	return v, nil
}

// Sets are the calling thread's effective, permitted and inheritable sets
// as bit masks (bit c is capability c). The zero value holds none.
type Sets struct {
	Effective, Permitted, Inheritable uint64
}

// Raise makes capability c effective on the calling thread when it is
// permitted there and not yet effective, as a permitted-only file
// capability (cap_ipc_lock+p) needs before the call that checks it. lower
// takes back what Raise added (nothing when c was effective already or not
// permitted); it is never nil. The caller has locked its goroutine to the
// thread (runtime.LockOSThread).
func Raise(c int) (lower func(), err error) {
	lower = func() {}
	s, err := Get()
	if err != nil {
		return lower, err
	}
	if !Has(s.Permitted, c) || Has(s.Effective, c) {
		return lower, nil
	}
	raised := s
	raised.Effective |= 1 << uint(c)
	if err := Set(raised); err != nil {
		return lower, fmt.Errorf("raise %s to effective: %w", Name(c), err)
	}
	return func() { _ = Set(s) }, nil
}
