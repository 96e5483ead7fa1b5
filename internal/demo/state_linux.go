//go:build linux

package demo

import (
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/ncclrun/ncclrun/internal/units"
)

// probeState reads this process's memlock limit, CAP_IPC_LOCK in its
// permitted set and whether it runs in a user namespace.
func probeState() (State, error) {
	var st State
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &lim); err != nil {
		return st, fmt.Errorf("getrlimit RLIMIT_MEMLOCK: %w", err)
	}
	st.MemlockSoft, st.MemlockHard = rlim(lim.Cur), rlim(lim.Max)
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return st, fmt.Errorf("capget: %w", err)
	}
	st.IPCLockPermitted = data[unix.CAP_IPC_LOCK/32].Permitted&(1<<(unix.CAP_IPC_LOCK%32)) != 0
	if m, err := os.ReadFile("/proc/self/uid_map"); err == nil {
		st.UserNamespace = !isIdentityMap(string(m))
	}
	return st, nil
}

func rlim(v uint64) int64 {
	if v == unix.RLIM_INFINITY || v > 1<<62 {
		return units.Unlimited
	}
	return int64(v)
}

// isIdentityMap reports whether a uid_map is the initial namespace's
// "0 0 4294967295".
func isIdentityMap(m string) bool {
	return strings.Join(strings.Fields(m), " ") == "0 0 4294967295"
}
