package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ncclrun/ncclrun/internal/testutil"
)

// Promise: `nohup ncclrun -- CMD` behaves as `nohup CMD`: a
// SIGHUP ignored when ncclrun starts stays ignored for CMD and neither
// kills ncclrun nor reaches CMD.
func TestTrustIgnoredSignalStaysIgnored(t *testing.T) {
	sh := testutil.RequireTool(t, "sh")
	r := invocation{pre: []string{sh, "-c", `trap '' HUP; exec "$@"`, "sh"}, args: []string{"--quiet", "--", "sh", "-c",
		`grep ^SigIgn: /proc/self/status; kill -HUP $PPID; kill -HUP $$; echo survived`}}.run(t)
	require.Equal(t, 0, r.code, "stdout %q stderr %q", r.stdout, r.stderr)
	mask, err := strconv.ParseUint(strings.TrimSpace(strings.TrimPrefix(strings.SplitN(r.stdout, "\n", 2)[0], "SigIgn:")), 16, 64)
	require.NoError(t, err, "stdout %q", r.stdout)
	assert.NotZero(t, mask&1, "SIGHUP is not ignored in CMD: %q", r.stdout)
	assert.True(t, strings.HasSuffix(r.stdout, "survived\n"), "stdout %q", r.stdout)
}

// envLines parses `env` output into a sorted list.
func envLines(out string) []string {
	var l []string
	for _, s := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if s != "" {
			l = append(l, s)
		}
	}
	sort.Strings(l)
	return l
}

// Promise: the cap_ipc_lock+p binary run by uid 1000 (Go's
// secure mode, which forces GOTRACEBACK=none into its own environment)
// gives CMD exactly the environment it was given plus what it lists in
// env_added: GOTRACEBACK as the user set it, or absent; with and without
// the trampoline (--memlock).
func TestTrustCapBinaryKeepsCMDEnvironment(t *testing.T) {
	capBin := capCopy(t)
	dir, err := os.MkdirTemp("", "ncclrun-env-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o777))
	for name, tc := range map[string]struct{ env, flags []string }{
		"user's GOTRACEBACK":             {env: []string{"GOTRACEBACK=all", "KEEP_ME=1"}},
		"no GOTRACEBACK":                 {env: []string{"KEEP_ME=1"}},
		"trampoline, user's GOTRACEBACK": {env: []string{"GOTRACEBACK=crash"}, flags: []string{"--memlock", "1MiB"}},
		"trampoline, no GOTRACEBACK":     {flags: []string{"--memlock", "1MiB"}},
	} {
		t.Run(name, func(t *testing.T) {
			report := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".json")
			iv := invocation{pre: asUser1000, path: capBin, env: tc.env,
				args: append(append([]string{"--quiet", "--report", report}, tc.flags...), "--", "env")}
			r := iv.run(t)
			require.Equal(t, 0, r.code, "stderr %q", r.stderr)
			var rep struct {
				EnvAdded map[string]struct{ Value string } `json:"env_added"`
			}
			require.NoError(t, json.Unmarshal([]byte(mustRead(t, report)), &rep))
			want := append(baseEnv(t), tc.env...)
			// baseEnv's HOME is a new temp dir each call: take the one the child saw.
			for _, l := range envLines(r.stdout) {
				if strings.HasPrefix(l, "HOME=") {
					for i := range want {
						if strings.HasPrefix(want[i], "HOME=") {
							want[i] = l
						}
					}
				}
			}
			for k, v := range rep.EnvAdded {
				want = append(want, k+"="+v.Value)
			}
			sort.Strings(want)
			assert.Equal(t, want, envLines(r.stdout))
		})
	}
}

// Promise: `--user 1000` as uid 1000 is a no-op, not a
// setgroups that needs CAP_SETGID.
func TestTrustUserNamingOneselfIsNoOp(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireTool(t, "setpriv")
	for _, u := range []string{"1000", "1000:1000"} {
		r := invocation{pre: asUser1000, args: []string{"--quiet", "--user", u, "--", "sh", "-c", "id -u; id -g"}}.run(t)
		require.Equal(t, 0, r.code, "--user %s: stderr %q", u, r.stderr)
		assert.Equal(t, "1000\n1000\n", r.stdout)
		assert.Empty(t, r.stderr)
	}
}

// Promise: a --memlock hard limit that an unprivileged
// ncclrun cannot set is one line and exit 125 (ExitInternal: CMD cannot
// be started as asked), with the trampoline's own failure not doubled.
func TestTrustMemlockWithoutPrivilegeOneLine(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireTool(t, "setpriv")
	r := invocation{pre: asUser1000, args: []string{"--quiet", "--memlock", "unlimited", "--", "true"}}.run(t)
	require.Equal(t, ExitInternal, r.code, "stderr %q", r.stderr)
	require.Len(t, r.errLines(), 1, "stderr %q", r.stderr)
	assert.True(t, strings.HasPrefix(r.stderr, "ncclrun: "), "stderr %q", r.stderr)
	assert.Contains(t, r.stderr, "CAP_SYS_RESOURCE")
	assert.Equal(t, 1, strings.Count(r.stderr, "not permitted")+strings.Count(r.stderr, "does not have"), "stderr %q", r.stderr)
}
