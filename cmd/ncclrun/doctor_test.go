package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ncclrun/ncclrun/internal/testutil"
)

// contractCheckIDs are the check ids docs/contract.md requires at least.
var contractCheckIDs = []string{"memlock", "capabilities", "rdma", "shm", "gpu", "gpudirect", "network"}

// requireDoctorShape asserts docs/contract.md's doctor JSON keys.
func requireDoctorShape(t *testing.T, doc map[string]any) {
	t.Helper()
	kind := jpath(t, doc, "environment", "kind")
	require.Contains(t, []any{"kubernetes", "docker", "slurm", "host"}, kind)
	for _, c := range doc["checks"].([]any) {
		m := c.(map[string]any)
		for _, k := range []string{"id", "status", "summary"} {
			require.Contains(t, m, k, "check %v", m)
		}
		require.Contains(t, []any{"ok", "warn", "fail", "skip"}, m["status"], "check %v", m)
	}
	for _, id := range contractCheckIDs {
		check(t, doc, id)
	}
	mem := check(t, doc, "memlock")
	for _, k := range []string{"soft", "hard", "soft_before", "hard_before"} {
		jpath(t, mem, "details", k)
	}
	capc := check(t, doc, "capabilities")
	jpath(t, capc, "details", "uid")
	jpath(t, capc, "details", "no_new_privs")
	for _, c := range []string{"ipc_lock", "sys_resource"} {
		for _, set := range []string{"effective", "permitted", "inheritable", "bounding", "ambient"} {
			_, ok := jpath(t, capc, "details", c, set).(bool)
			require.True(t, ok, "%s.%s is a boolean", c, set)
		}
	}
	jpath(t, capc, "details", "command", "uid")
	jpath(t, capc, "details", "command", "ipc_lock_effective")
	require.Contains(t, []any{"inherited", "ambient", "none"}, jpath(t, capc, "details", "command", "via"))
	_, ok := jpath(t, check(t, doc, "shm"), "details").(map[string]any)
	require.True(t, ok, "shm has details")
}

func TestDoctorJSONOnASnapshot(t *testing.T) {
	for _, tc := range []struct {
		name       string
		uid        int
		soft, hard string
		capEff     string
		want       string // memlock status
		code       int
		via        string
	}{
		// A default container: uid 1000, 64 KiB, no capabilities.
		{"non-root 64KiB", 1000, "65536", "65536", "0000000000000000", "fail", ExitCheckFailed, "none"},
		// 8 MiB fails too (docs/contract.md).
		{"non-root 8MiB", 1000, "8388608", "8388608", "0000000000000000", "fail", ExitCheckFailed, "none"},
		// Unlimited memlock needs no capability.
		{"non-root unlimited", 1000, "unlimited", "unlimited", "0000000000000000", "ok", -1, "none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := fakeTree(t, tc.uid, tc.soft, tc.hard, tc.capEff)
			r := ncclrun(t, "doctor", "--json", "--root", root)
			doc := decodeJSON(t, r.stdout)
			requireDoctorShape(t, doc)
			mem := check(t, doc, "memlock")
			require.Equal(t, tc.want, mem["status"], "memlock: %v", mem)
			require.Equal(t, tc.via, jpath(t, check(t, doc, "capabilities"), "details", "command", "via"))
			if tc.code >= 0 {
				require.Equal(t, tc.code, r.code)
			} else if r.code != 0 {
				require.Equal(t, ExitCheckFailed, r.code)
				require.Contains(t, r.stdout, `"fail"`, "exit 1 only when a check failed")
			}
		})
	}
}

func TestDoctorRootFlagBeforeCommandAndEnv(t *testing.T) {
	root := fakeTree(t, 1000, "65536", "65536", "0000000000000000")
	a := ncclrun(t, "--root", root, "doctor", "--json")
	b := invocation{args: []string{"doctor", "--json"}, env: []string{"NCCLRUN_ROOT=" + root}}.run(t)
	c := invocation{args: []string{"doctor"}, env: []string{"NCCLRUN_ROOT=" + root, "NCCLRUN_JSON=true"}}.run(t)
	require.Equal(t, ExitCheckFailed, a.code)
	require.Equal(t, a.stdout, b.stdout)
	require.Equal(t, a.stdout, c.stdout)
	require.Equal(t, "fail", check(t, decodeJSON(t, a.stdout), "memlock")["status"])
}

func TestDoctorTable(t *testing.T) {
	root := fakeTree(t, 1000, "65536", "65536", "0000000000000000")
	r := ncclrun(t, "doctor", "--root", root)
	require.Equal(t, ExitCheckFailed, r.code)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.True(t, strings.HasPrefix(lines[0], "environment: "), r.stdout)
	var header int
	for i, l := range lines {
		if strings.HasPrefix(l, "CHECK") {
			header = i
		}
	}
	require.Regexp(t, `^CHECK +STATUS +SUMMARY$`, lines[header])
	statusCol := strings.Index(lines[header], "STATUS")
	summaryCol := strings.Index(lines[header], "SUMMARY")
	seen := map[string]bool{}
	fixes := 0
	for _, l := range lines[header+1:] {
		require.LessOrEqual(t, len(l), 100+40, "line %q is wrapped", l)
		if strings.HasPrefix(l, " ") {
			// a wrapped summary or a fix, under the summary column (a
			// fix's own continuation lines are indented further)
			require.Equal(t, strings.Repeat(" ", summaryCol), l[:summaryCol], "line %q", l)
			require.NotEmpty(t, strings.TrimSpace(l), "line %q", l)
			if strings.HasPrefix(l[summaryCol:], "fix: ") {
				fixes++
			}
			continue
		}
		id := strings.Fields(l)[0]
		seen[id] = true
		require.Greater(t, len(l), statusCol, "line %q", l)
		require.NotEqual(t, ' ', rune(l[statusCol]), "status column aligned in %q", l)
		if id == "memlock" {
			require.Equal(t, "fail", strings.Fields(l[statusCol:])[0])
		}
	}
	for _, id := range contractCheckIDs {
		require.True(t, seen[id], "row %s in\n%s", id, r.stdout)
	}
	require.Positive(t, fixes, "the failed memlock check shows its fix:\n%s", r.stdout)
}

// The live credential states Docker and Kubernetes give, reproduced with
// prlimit and setpriv.
func TestDoctorUnderRealCredentials(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireTool(t, "prlimit")
	testutil.RequireTool(t, "setpriv")
	testutil.RequireCap(t, 14) // CAP_IPC_LOCK

	nonRoot := []string{"prlimit", "--memlock=65536:65536", "setpriv", "--reuid", "1000", "--regid", "1000", "--clear-groups",
		"--inh-caps", "-all", "--bounding-set", "-all,+ipc_lock"}

	t.Run("uid 1000, 64KiB, no capability", func(t *testing.T) {
		r := invocation{pre: nonRoot, args: []string{"doctor", "--json", "--probe", "16MiB"}}.run(t)
		doc := decodeJSON(t, r.stdout)
		requireDoctorShape(t, doc)
		require.Equal(t, ExitCheckFailed, r.code)
		mem := check(t, doc, "memlock")
		require.Equal(t, "fail", mem["status"])
		require.Equal(t, "none", jpath(t, check(t, doc, "capabilities"), "details", "command", "via"))
		require.Equal(t, float64(65536), jpath(t, mem, "details", "soft"))
		require.Equal(t, false, jpath(t, mem, "details", "probe_ok"))
		require.Equal(t, float64(16<<20), jpath(t, mem, "details", "probe_bytes"))
		// The probe's error is said once.
		require.Equal(t, "mlock 16 MiB: cannot allocate memory", jpath(t, mem, "details", "probe_error"))
		require.Contains(t, mem["summary"], "failed (mlock 16 MiB: cannot allocate memory)")
	})

	t.Run("root with CAP_IPC_LOCK", func(t *testing.T) {
		r := invocation{pre: []string{"prlimit", "--memlock=65536:65536"}, args: []string{"doctor", "--json", "--probe", "16MiB"}}.run(t)
		doc := decodeJSON(t, r.stdout)
		requireDoctorShape(t, doc)
		mem := check(t, doc, "memlock")
		require.Equal(t, "ok", mem["status"], "%v", mem)
		require.Equal(t, true, jpath(t, check(t, doc, "capabilities"), "details", "command", "ipc_lock_effective"))
		require.Equal(t, true, jpath(t, mem, "details", "probe_ok"))
	})

	t.Run("file capability cap_ipc_lock+p under uid 1000", func(t *testing.T) {
		capBin := capCopy(t)
		r := invocation{pre: nonRoot, path: capBin, args: []string{"doctor", "--json", "--probe", "16MiB"}}.run(t)
		doc := decodeJSON(t, r.stdout)
		requireDoctorShape(t, doc)
		capc := check(t, doc, "capabilities")
		require.Equal(t, "ambient", jpath(t, capc, "details", "command", "via"))
		require.Equal(t, true, jpath(t, capc, "details", "command", "ipc_lock_effective"))
		mem := check(t, doc, "memlock")
		require.Equal(t, "ok", mem["status"], "%v", mem)
		require.Equal(t, true, jpath(t, mem, "details", "probe_ok"))

		// And run gives CMD that capability: a non-root child pins 16 MiB
		// under a 64 KiB limit.
		// (CMD is a plain copy: a file-capability binary would lose the
		// ambient set on exec.)
		r = invocation{pre: nonRoot, path: capBin, args: []string{"--quiet", "--", bin, "probe-mlock", "16MiB"}}.run(t)
		require.Equal(t, 0, r.code, "stderr: %q", r.stderr)
	})
}
