//go:build !linux

package testutil

import "testing"

// RequireCap skips (fails in CI): capabilities are Linux's.
func RequireCap(t testing.TB, c int) {
	t.Helper()
	SkipOrFail(t, "capability %d: capabilities exist on Linux only", c)
}
