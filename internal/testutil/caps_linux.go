package testutil

import (
	"testing"

	"golang.org/x/sys/unix"
)

// RequireCap skips (fails in CI) unless the calling thread has capability
// c (a unix.CAP_* number) in its effective set.
func RequireCap(t testing.TB, c int) {
	t.Helper()
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		SkipOrFail(t, "capget: %v", err)
		return
	}
	if data[c/32].Effective&(1<<(uint(c)%32)) == 0 {
		SkipOrFail(t, "needs capability %d in the effective set", c)
	}
}
