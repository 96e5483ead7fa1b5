package testutil

import (
	"testing"

	"github.com/ncclrun/ncclrun/internal/caps"
)

// RequireCap skips (fails in CI) unless the calling thread has capability
// c (a caps or unix.CAP_* number) in its effective set; capabilities exist
// on Linux only.
func RequireCap(t testing.TB, c int) {
	t.Helper()
	s, err := caps.Get()
	if err != nil {
		SkipOrFail(t, "capability %s: %v", caps.Name(c), err)
		return
	}
	if !caps.Has(s.Effective, c) {
		SkipOrFail(t, "needs %s in the effective set", caps.Name(c))
	}
}
