//go:build linux

package preflight

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/ncclrun/ncclrun/internal/rlimit"
)

// liveStatus reads the calling thread's credentials. Capabilities are per
// thread in Go, so the goroutine is locked to its thread while status is
// read from /proc/thread-self and no_new_privs is asked with prctl(2).
func liveStatus() (procStatus, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b, err := readLive("/proc/thread-self/status", maxFile, false)
	if err != nil {
		var err2 error
		b, err2 = readLive("/proc/self/status", maxFile, false)
		if err2 != nil {
			return procStatus{}, fmt.Errorf("read /proc/thread-self/status: %w", err)
		}
	}
	st, err := parseStatus(bytes.NewReader(b))
	if err != nil {
		return st, fmt.Errorf("parse /proc/thread-self/status: %w", err)
	}
	nnp, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)
	if err == nil {
		st.NoNewPrivs, st.HasNNP = nnp == 1, true
	}
	return st, nil
}

// liveMemlock returns this process's RLIMIT_MEMLOCK.
func liveMemlock() (Rlimit, error) {
	l, err := rlimit.Get(rlimit.Memlock)
	return Rlimit{Soft: l.Soft, Hard: l.Hard}, err
}

// statfsSize returns the size in bytes of the filesystem holding path.
func statfsSize(path string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, fmt.Errorf("statfs %q: %w", path, err)
	}
	return int64(st.Blocks) * int64(st.Bsize), nil
}

// openRW checks that a device node can be opened read-write, as
// libibverbs opens /dev/infiniband/uverbsN.
func openRW(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("open %q: %w", path, err)
	}
	return f.Close()
}

// fileCaps reports whether path carries a file capability
// (security.capability extended attribute).
func fileCaps(path string) (bool, error) {
	buf := make([]byte, 64)
	n, err := unix.Getxattr(path, "security.capability", buf)
	if errors.Is(err, unix.ENODATA) || errors.Is(err, unix.ENOTSUP) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("getxattr %q security.capability: %w", path, err)
	}
	return n > 0, nil
}
