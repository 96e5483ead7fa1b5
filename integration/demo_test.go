//go:build integration

package integration

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestDemoInImage runs `ncclrun demo` in the image Dockerfile.base builds,
// where ncclrun carries cap_ipc_lock+p: the demo's fake job must not be that
// file (its exec would leave CAP_IPC_LOCK permitted but not effective), so
// every state a container can start in shows a fix that works.
func TestDemoInImage(t *testing.T) {
	img := dockerfileBaseImage(t)
	const (
		capFix   = "[2/2] With the fix: keep CAP_IPC_LOCK"
		limitFix = "[2/2] With the fix: the memlock limit this machine allows"
		copyLine = "the fake job runs from a copy of ncclrun without them"
	)
	user := []string{"--user", "1000:1000"}
	tests := []struct {
		name string
		opts []string
		// unlimited: the row asks for --ulimit memlock=-1:-1, which an
		// engine without CAP_SYS_RESOURCE refuses to start.
		unlimited bool
		want      string // the fix's headline
		why       string // part of the "Fix applied:" sentence
		copied    bool   // the fake job ran from the copy
	}{
		{name: "uid 1000, cap-add IPC_LOCK, 64 KiB", opts: append(user, "--cap-add", "IPC_LOCK", "--ulimit", "memlock=65536:65536"),
			want: capFix, why: "holds CAP_IPC_LOCK in its permitted set", copied: true},
		{name: "uid 1000, cap-drop ALL, cap-add IPC_LOCK", opts: append(user, "--cap-drop", "ALL", "--cap-add", "IPC_LOCK"),
			want: capFix, why: "holds CAP_IPC_LOCK in its permitted set", copied: true},
		{name: "uid 1000, cap-add IPC_LOCK, soft 64 KiB hard 8 MiB, noexec TMPDIR", opts: append(user, "--cap-add", "IPC_LOCK", "--ulimit", "memlock=65536:8388608", "--tmpfs", "/scratch:rw,noexec,mode=1777", "-e", "TMPDIR=/scratch"),
			want: limitFix, why: "the fake job is ncclrun itself"},
		{name: "uid 1000, cap-add IPC_LOCK, unlimited", opts: append(user, "--cap-add", "IPC_LOCK", "--ulimit", "memlock=-1:-1"), unlimited: true,
			want: capFix, why: "holds CAP_IPC_LOCK in its permitted set", copied: true},
		{name: "uid 1000, default capabilities", opts: user,
			want: limitFix, why: "holds no usable CAP_IPC_LOCK", copied: true},
		{name: "uid 1000, unlimited", opts: append(user, "--ulimit", "memlock=-1:-1"), unlimited: true,
			want: limitFix, why: "holds no usable CAP_IPC_LOCK", copied: true},
		{name: "root, default capabilities",
			want: limitFix, why: "holds no usable CAP_IPC_LOCK", copied: true},
		{name: "root, cap-add IPC_LOCK, 64 KiB", opts: []string{"--cap-add", "IPC_LOCK", "--ulimit", "memlock=65536:65536"},
			want: capFix, why: "holds CAP_IPC_LOCK in its permitted set", copied: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := append(append([]string{}, tc.opts...), "--entrypoint", "/usr/local/bin/ncclrun")
			r := runContainer(t, opts, img, "demo")
			if tc.unlimited && !engineCanRaiseLimits() {
				assert.Equal(t, 125, r.Code, "docker run exit status")
				assert.Contains(t, r.Stderr, "error setting rlimit type 8: operation not permitted")
				t.Logf("this engine cannot set memlock=-1:-1 (no CAP_SYS_RESOURCE): the container does not start")
				return
			}
			assert.Equalf(t, 0, r.Code, "ncclrun demo: stdout:\n%s\nstderr:\n%s", r.Stdout, r.Stderr)
			assert.Contains(t, r.Stdout, "Demo OK")
			assert.Contains(t, r.Stdout, tc.want)
			assert.Regexp(t, `(?m)^Fix applied: .*`+tc.why, r.Stdout)
			if tc.copied {
				assert.Contains(t, r.Stdout, copyLine)
			} else {
				assert.NotContains(t, r.Stdout, copyLine)
			}
		})
	}
}
