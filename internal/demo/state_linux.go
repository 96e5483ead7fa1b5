//go:build linux

package demo

import (
	"os"
	"strings"

	"github.com/ncclrun/ncclrun/internal/caps"
	"github.com/ncclrun/ncclrun/internal/rlimit"
)

// probeState reads this process's memlock limit, CAP_IPC_LOCK in its
// permitted set, whether it runs in a user namespace and whether self, its
// executable, carries file capabilities.
func probeState(self string) (State, error) {
	var st State
	lim, err := rlimit.Get(rlimit.Memlock)
	if err != nil {
		return st, err
	}
	st.Memlock = lim
	cs, err := caps.Get()
	if err != nil {
		return st, err
	}
	st.IPCLockPermitted = caps.Has(cs.Permitted, caps.IPCLock)
	if m, err := os.ReadFile("/proc/self/uid_map"); err == nil {
		st.UserNamespace = !isIdentityMap(string(m))
	}
	if st.FileCaps, err = caps.FileCaps(self); err != nil {
		return st, err
	}
	return st, nil
}

// isIdentityMap reports whether a uid_map is the initial namespace's
// "0 0 4294967295".
func isIdentityMap(m string) bool {
	return strings.Join(strings.Fields(m), " ") == "0 0 4294967295"
}
