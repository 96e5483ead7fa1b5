package launcher

import (
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/ncclrun/ncclrun/internal/environ"
)

// atSecure is AT_SECURE, the auxiliary vector entry the kernel sets to 1
// when the program was started with more privilege than its caller (a
// file capability such as cap_ipc_lock+p, setuid, setgid).
const atSecure = 23

// maxEnviron bounds the read of /proc/self/environ (the kernel's own
// limit on argv plus envp is a quarter of the stack limit; 16 MiB is far
// above any real environment).
const maxEnviron = 16 << 20

// Environ returns ncclrun's environment as the kernel handed it over:
// os.Environ(), except in Go's secure mode (AT_SECURE, e.g. the
// cap_ipc_lock+p binary), where the Go runtime forces GOTRACEBACK=none
// into os.Environ() before main runs (replacing the user's value, or
// adding it). CMD must get the environment it would have had without
// ncclrun, so then the initial block is read back from /proc/self/environ.
// A process started with a file capability is not dumpable, which makes
// that file root's; ncclrun makes itself dumpable for the read and
// restores the setting at once (being dumpable does not let a same-uid
// process lacking CAP_IPC_LOCK trace or read it: the kernel's ptrace
// check also compares capability sets). If the block cannot be read,
// os.Environ() is returned.
func Environ() []string {
	if !secureMode() {
		return os.Environ()
	}
	b, err := readEnviron()
	if err != nil {
		return os.Environ()
	}
	return environ.Parse(b, 0)
}

// secureMode reports whether the kernel started ncclrun with AT_SECURE.
func secureMode() bool {
	auxv, err := unix.Auxv()
	if err != nil {
		return false
	}
	for _, kv := range auxv {
		if kv[0] == atSecure {
			return kv[1] != 0
		}
	}
	return false
}

func readEnviron() ([]byte, error) {
	b, err := readEnvironFile()
	if err == nil {
		return b, nil
	}
	was, gerr := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0)
	if gerr != nil || was != 0 {
		return nil, err
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 1, 0, 0, 0); err != nil {
		return nil, err
	}
	defer func() { _ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0) }()
	return readEnvironFile()
}

func readEnvironFile() ([]byte, error) {
	f, err := os.Open("/proc/self/environ")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxEnviron))
}
