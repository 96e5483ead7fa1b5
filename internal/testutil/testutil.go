// Package testutil holds the test helpers shared by ncclrun's packages:
// skips that turn into failures in CI, where every prerequisite must exist.
package testutil

import (
	"os"
	"os/exec"
	"testing"
)

// InCI reports whether the tests run in CI (CI=true), where a skip for a
// missing privilege or tool is a failure.
func InCI() bool {
	v := os.Getenv("CI")
	return v == "true" || v == "1"
}

// SkipOrFail skips the test on a developer's machine and fails it in CI.
func SkipOrFail(t testing.TB, format string, args ...any) {
	t.Helper()
	if InCI() {
		t.Fatalf("CI=true: a test that needs this must not skip: "+format, args...)
	}
	t.Skipf(format, args...)
}

// RequireRoot skips (fails in CI) unless the test runs as root.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		SkipOrFail(t, "needs root (euid is %d)", os.Geteuid())
	}
}

// RequireTool skips (fails in CI) unless name is on PATH, and returns its path.
func RequireTool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		SkipOrFail(t, "needs %s on PATH: %v", name, err)
	}
	return p
}
