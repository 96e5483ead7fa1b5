package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ncclrun/ncclrun/internal/pinrule"
	"github.com/ncclrun/ncclrun/internal/testutil"
	"github.com/ncclrun/ncclrun/lint"
)

// agreePod is a GPU pod with the given pod securityContext, container
// securityContext and command, and extra pod spec / metadata lines.
func agreePod(meta, spec, podSC, sc, command string) string {
	s := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: agree\n" + meta + "spec:\n" + spec
	if podSC != "" {
		s += "  securityContext:\n" + podSC
	}
	s += "  containers:\n    - name: trainer\n      image: trainer:1\n      command: " + command + "\n"
	if sc != "" {
		s += "      securityContext:\n" + sc
	}
	return s + "      resources: {limits: {nvidia.com/gpu: 8}}\n"
}

const (
	agreeNonRoot = "    runAsUser: 1000\n    runAsGroup: 1000\n    runAsNonRoot: true\n"
	agreeTorch   = `["torchrun", "train.py"]`
	agreeNcclrun = `["/usr/local/bin/ncclrun", "--", "torchrun", "train.py"]`
	agreeUser    = `["/usr/local/bin/ncclrun", "--user=1000:1000", "--", "torchrun", "train.py"]`
)

func agreeSC(lines ...string) string {
	s := ""
	for _, l := range lines {
		s += "        " + l + "\n"
	}
	return s
}

// TestDoctorAndLintAgree: doctor and lint make one decision. For every row of
// internal/pinrule's table that a manifest can express, lint on the
// manifest and doctor in the state that manifest produces (re-created with
// prlimit, setpriv, unshare and the cap_ipc_lock+p binary, or a snapshot
// tree where this machine cannot make the state) name the same row.
// 8 MiB is lint's assumed node limit; doctor gets --min-memlock so that it
// judges memlock on this machine without RDMA.
func TestDoctorAndLintAgree(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireTool(t, "prlimit")
	testutil.RequireTool(t, "setpriv")
	testutil.RequireCap(t, 14) // CAP_IPC_LOCK, to hand on
	mem8 := "--memlock=8388608:8388608"
	trap := []string{"prlimit", mem8, "setpriv", "--reuid", "1000", "--regid", "1000", "--clear-groups", "--inh-caps=-all"}
	rootWith := func(bounding string) []string {
		return []string{"prlimit", mem8, "setpriv", "--inh-caps=-all", "--bounding-set", bounding}
	}
	cases := []struct {
		rule     string
		manifest string
		// doctor: a command prefix, the cap binary or not, ncclrun's
		// flags; or a snapshot tree (fakeTreeRDMA arguments).
		pre     []string
		fileCap bool
		flags   []string
		tree    func(t *testing.T) string
	}{
		{rule: pinrule.RuleUnlimited,
			manifest: agreePod("  annotations:\n    ulimits.noderesource.dev/container.trainer: '[{type: RLIMIT_MEMLOCK, soft: 18446744073709551615, hard: 18446744073709551615}]'\n", "",
				agreeNonRoot, agreeSC("allowPrivilegeEscalation: false", "capabilities: {drop: [ALL]}"), agreeNcclrun),
			// This machine cannot raise a hard limit (no CAP_SYS_RESOURCE): a snapshot.
			tree: func(t *testing.T) string {
				return fakeTreeRDMA(t, 1000, "unlimited", "unlimited", "0000000000000000", true)
			}},
		{rule: pinrule.RuleAmbient, // way (a)
			manifest: agreePod("", "", "", agreeSC("runAsUser: 0", "allowPrivilegeEscalation: false", "capabilities: {drop: [ALL], add: [IPC_LOCK, SETUID, SETGID]}"), agreeUser),
			pre:      append(rootWith("-all,+ipc_lock,+setuid,+setgid"), "--no-new-privs"), flags: []string{"--user=1000:1000"}},
		{rule: pinrule.RuleAmbient, // way (b): the seed's securityContext, ncclrun in exec form
			manifest: agreePod("", "", agreeNonRoot, agreeSC("allowPrivilegeEscalation: false", "capabilities: {drop: [ALL], add: [IPC_LOCK]}"), agreeNcclrun),
			pre:      append(append([]string{}, trap...), "--bounding-set", "-all,+ipc_lock", "--no-new-privs"), fileCap: true},
		{rule: pinrule.RuleRootIPCLock,
			manifest: agreePod("", "", "", agreeSC("capabilities: {add: [IPC_LOCK]}"), agreeTorch),
			pre:      rootWith("-sys_resource")},
		{rule: pinrule.RuleLimitZero,
			manifest: agreePod("  annotations:\n    ulimits.noderesource.dev/container.trainer: '[{type: RLIMIT_MEMLOCK, soft: 0, hard: 0}]'\n", "", "", "", agreeTorch),
			pre:      []string{"prlimit", "--memlock=0:0", "setpriv", "--inh-caps=-all", "--bounding-set", "-ipc_lock,-sys_resource"}},
		{rule: pinrule.RuleUserNS,
			manifest: agreePod("", "  hostUsers: false\n", "", agreeSC("runAsUser: 0", "capabilities: {add: [IPC_LOCK]}"), agreeTorch),
			pre:      []string{"prlimit", mem8, "unshare", "--user", "--map-root-user"}},
		{rule: pinrule.RuleFinite,
			manifest: agreePod("  annotations:\n    ulimits.noderesource.dev/container.trainer: '[{type: RLIMIT_MEMLOCK, soft: 4294967296, hard: 4294967296}]'\n", "",
				agreeNonRoot, agreeSC("capabilities: {drop: [ALL]}"), agreeNcclrun),
			tree: func(t *testing.T) string {
				return fakeTreeRDMA(t, 1000, "4294967296", "4294967296", "0000000000000000", true)
			}},
		{rule: pinrule.RuleNoSetid,
			manifest: agreePod("", "", "", agreeSC("runAsUser: 0", "capabilities: {drop: [ALL], add: [IPC_LOCK]}"), agreeUser),
			pre:      rootWith("-all,+ipc_lock"), flags: []string{"--user=1000:1000"}},
		{rule: pinrule.RuleDropped,
			manifest: agreePod("", "", "", agreeSC("capabilities: {add: [IPC_LOCK]}"), `["/usr/local/bin/ncclrun", "--drop-cap=IPC_LOCK", "--", "torchrun"]`),
			pre:      rootWith("-sys_resource"), flags: []string{"--drop-cap=IPC_LOCK"}},
		{rule: pinrule.RuleNNPFileCap, // the seed's securityContext, ncclrun behind sh -c
			manifest: agreePod("", "", agreeNonRoot, agreeSC("allowPrivilegeEscalation: false", "capabilities: {drop: [ALL], add: [IPC_LOCK]}"),
				`["sh", "-c", "/usr/local/bin/ncclrun -- torchrun train.py"]`),
			pre:     append(append([]string{}, trap...), "--bounding-set", "-all,+ipc_lock", "--no-new-privs", "sh", "-c", `"$0" "$@"; exit $?`),
			fileCap: true},
		{rule: pinrule.RuleK8sTrap, // the seed's pod
			manifest: agreePod("", "", agreeNonRoot, agreeSC("allowPrivilegeEscalation: false", "capabilities: {drop: [ALL], add: [IPC_LOCK]}"), agreeTorch),
			pre:      append(append([]string{}, trap...), "--bounding-set", "-all,+ipc_lock", "--no-new-privs")},
		{rule: pinrule.RuleRootNoIPCLock,
			manifest: agreePod("", "", "", "", agreeTorch),
			pre:      rootWith("-ipc_lock,-sys_resource")},
		{rule: pinrule.RuleNoIPCLock,
			manifest: agreePod("", "", agreeNonRoot, agreeSC("allowPrivilegeEscalation: false", "capabilities: {drop: [ALL]}"), agreeTorch),
			pre:      append(append([]string{}, trap...), "--bounding-set", "-all", "--no-new-privs")},
	}
	// Rows a manifest cannot express.
	inexpressible := map[string]string{
		pinrule.RuleInherited:  "Kubernetes and Compose cannot set ambient capabilities",
		pinrule.RuleUnknown:    "a manifest always describes credentials",
		pinrule.RuleCmdFileCap: "a manifest does not show the file capabilities of CMD's executable",
		pinrule.RuleCmdCapLost: "a manifest does not show the file capabilities of CMD's executable",
	}
	covered := map[string]bool{}
	for _, tc := range cases {
		covered[tc.rule] = true
		t.Run(tc.rule, func(t *testing.T) {
			rep, err := lint.CheckBytes("agree.yaml", []byte(tc.manifest))
			require.NoError(t, err)
			require.Len(t, rep.Containers, 1)
			lv := rep.Containers[0].Verdict

			iv := invocation{pre: tc.pre, args: append([]string{"doctor", "--json", "--min-memlock=1GiB"}, tc.flags...)}
			if tc.fileCap {
				iv.path = capCopy(t)
			}
			if tc.tree != nil {
				iv = invocation{args: []string{"doctor", "--json", "--root", tc.tree(t)}}
			}
			r := iv.run(t)
			require.Contains(t, []int{0, 1}, r.code, "doctor: %s", r.stderr)
			mem := check(t, decodeJSON(t, r.stdout), "memlock")
			assert.Equal(t, tc.rule, jpath(t, mem, "details", "rule"), "doctor: %v", mem["summary"])
			assert.Equal(t, tc.rule, lv.Rule, "lint")
			assert.Equal(t, string(lv.Status), mem["status"], "the same status too")
		})
	}
	for _, row := range pinrule.Table {
		_, skip := inexpressible[row.Name]
		assert.True(t, covered[row.Name] || skip, "row %s has an agreement case", row.Name)
	}
}

// TestLintAgreesOnUsage: lint finds ncclrun-usage in a pod whose command
// is ncclrun with these flags and environment exactly when ncclrun itself,
// given them, exits 2 before starting the command.
func TestLintAgreesOnUsage(t *testing.T) {
	for _, c := range []struct {
		words []string
		env   string // NAME=VALUE
	}{
		{words: []string{"--stop-grace", "1s"}},
		{words: []string{"--stop-grase", "1s"}},
		{words: []string{"run", "--quiet", "--stop-grace=1s"}},
		{words: []string{"--quiet", "run", "--json"}},
		{words: []string{"--json", "run"}},
		{words: []string{"--no-transport-probe", "run", "--hang-after", "1h"}},
		{words: []string{"--format", "json"}},
		{words: []string{"--stop-grace", "bogus"}},
		{words: []string{"--no-watch=maybe"}},
		{words: []string{"run", "--quiet=false", "--kill-after=90s"}},
		{env: "NCCLRUN_KILL_AFTER=90"},
		{words: []string{"--kill-after", "5s"}, env: "NCCLRUN_KILL_AFTER=90"},
		{env: "NCCLRUN_QUIET=yes"},
		{env: "NCCLRUN_QUIET="},
		{env: "NCCLRUN_JSON=bogus"}, // explain's and doctor's variable: run does not read it
		{words: []string{"--stop-grace=-1s"}},
		{env: "NCCLRUN_HANG_AFTER=-5m"},
		{words: []string{"run", "--help"}},
		{words: []string{"--on-hang=sometimes"}},
		{words: []string{"--on-hang", "Stop", "--nccl-ib", "maybe"}},
		{words: []string{"--nccl-debug", "loud"}},
		{env: "NCCLRUN_ON_DEGRADED=bogus"},
		{env: "NCCLRUN_NCCL_IB=no"},
	} {
		t.Run(strings.Join(c.words, " ")+" "+c.env, func(t *testing.T) {
			argv := append(append([]string{}, c.words...), "--", "true")
			var env []string
			manifestEnv := ""
			if c.env != "" {
				env = []string{c.env}
				name, value, _ := strings.Cut(c.env, "=")
				manifestEnv = fmt.Sprintf("      env: [{name: %s, value: %q}]\n", name, value)
			}
			r := invocation{args: argv, env: env}.run(t)
			quoted := `["/usr/local/bin/ncclrun", "` + strings.Join(argv, `", "`) + `"]`
			pod := strings.Replace(agreePod("", "", "", "", quoted), "      resources:", manifestEnv+"      resources:", 1)
			rep, err := lint.CheckBytes("agree.yaml", []byte(pod))
			require.NoError(t, err)
			found := false
			for _, f := range rep.Findings {
				found = found || f.ID == lint.IDNcclrunUsage
			}
			assert.Equal(t, r.code == ExitUsage, found, "ncclrun exits %d: %s", r.code, r.stderr)
		})
	}
}
