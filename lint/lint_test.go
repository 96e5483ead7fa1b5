package lint

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ncclrun/ncclrun/internal/pinrule"
)

var update = flag.Bool("update", false, "rewrite testdata/golden")

func lintPath(t *testing.T, p string) Report {
	t.Helper()
	rep := Paths([]string{p}, nil)
	require.Empty(t, rep.Errors)
	return rep
}

func ids(rep Report) []string {
	out := []string{}
	for _, f := range rep.Findings {
		out = append(out, f.ID+"@"+itoa(f.Line))
	}
	return out
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func rules(rep Report) []string {
	var out []string
	for _, c := range rep.Containers {
		out = append(out, c.Verdict.Rule)
	}
	return out
}

// TestKinds: every kind's pod templates are found (each testdata/kinds
// file holds the trap once per template) and judged alike.
func TestKinds(t *testing.T) {
	want := map[string][]string{ // file -> objects, one per container
		"cronjob.yaml":               {"CronJob/cj"},
		"daemonset.yaml":             {"DaemonSet/ds"},
		"deployment.yaml":            {"Deployment/d"},
		"job.yaml":                   {"Job/j"},
		"json-stream.json":           {"Pod/one", "Pod/two"},
		"jobset.yaml":                {"JobSet/js"},
		"leaderworkerset.yaml":       {"LeaderWorkerSet/lws", "LeaderWorkerSet/lws"},
		"list.yaml":                  {"Pod/a"},
		"mpijob.yaml":                {"MPIJob/mj"},
		"multi-doc.yaml":             {"Pod/one", "Pod/two"},
		"pod.json":                   {"Pod/pj"},
		"pod.yaml":                   {"Pod/p"},
		"podtemplate.yaml":           {"PodTemplate/pt"},
		"pytorchjob.yaml":            {"PyTorchJob/pj", "PyTorchJob/pj"},
		"raycluster.yaml":            {"RayCluster/rc", "RayCluster/rc"},
		"rayjob.yaml":                {"RayJob/rj"},
		"replicaset.yaml":            {"ReplicaSet/rs"},
		"replicationcontroller.yaml": {"ReplicationController/rc"},
		"statefulset.yaml":           {"StatefulSet/s"},
		"tfjob.yaml":                 {"TFJob/tj"},
		"trainingruntime.yaml":       {"ClusterTrainingRuntime/torch"},
		"volcano-job.yaml":           {"Job/vj"},
	}
	files, _ := filepath.Glob("testdata/kinds/*")
	require.Len(t, files, len(want), "every testdata/kinds file has a row")
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			rep := lintPath(t, f)
			var objects []string
			for _, c := range rep.Containers {
				objects = append(objects, c.Object)
				assert.Equal(t, pinrule.RuleK8sTrap, c.Verdict.Rule, c.Object)
				assert.True(t, c.GPU)
			}
			assert.Equal(t, want[filepath.Base(f)], objects)
			n := map[string]int{}
			for _, fd := range rep.Findings {
				n[fd.ID]++
				assert.Equal(t, f, fd.File)
				assert.Positive(t, fd.Line)
			}
			assert.Equal(t, map[string]int{IDIPCLockInert: len(objects), IDPodSecurity: len(objects)}, n)
		})
	}
}

// TestRules: one manifest per rule and finding (testdata/rules,
// testdata/compose), with the finding's line and the rule table's row.
func TestRules(t *testing.T) {
	cases := []struct {
		file  string
		want  []string // id@line, in line order
		rules []string // one per container
	}{
		{"rules/trap.yaml", []string{"ipc-lock-inert@18", "pod-security@18"}, []string{"k8s-trap"}},
		{"rules/trap-cap-names.yaml", []string{"ipc-lock-inert@18", "pod-security@18"}, []string{"k8s-trap"}},
		{"rules/trap-runasnonroot-only.yaml", []string{"ipc-lock-inert@16", "pod-security@16"}, []string{"k8s-trap"}},
		{"rules/trap-add-all.yaml", []string{"ipc-lock-inert@11", "pod-security@11"}, []string{"k8s-trap"}},
		{"rules/trap-args-only.yaml", []string{"ipc-lock-inert@18", "pod-security@18"}, []string{"k8s-trap"}},
		{"rules/trap-no-gpu.yaml", []string{"pod-security@18"}, []string{"k8s-trap"}},
		{"rules/filecap-exec.yaml", []string{"pod-security@18"}, []string{"ambient-raise"}},
		{"rules/filecap-shell-nnp.yaml", []string{"nnp-shell@13", "pod-security@18"}, []string{"nnp-file-cap"}},
		{"rules/filecap-tini-nnp.yaml", []string{"nnp-shell@13", "pod-security@18"}, []string{"nnp-file-cap"}},
		{"rules/filecap-shell.yaml", []string{"pod-security@17"}, []string{"ambient-raise"}},
		{"rules/root-drop-to-user.yaml", []string{"pod-security@15"}, []string{"ambient-raise"}},
		{"rules/root-user-no-setid.yaml", []string{"user-needs-setuid@9", "pod-security@14"}, []string{"no-setuid"}},
		{"rules/root-user-env-no-setid.yaml", []string{"user-needs-setuid@9", "pod-security@17"}, []string{"no-setuid"}},
		{"rules/root-user-no-ipc-lock.yaml", []string{"no-ipc-lock@9"}, []string{"no-ipc-lock"}},
		{"rules/nonroot-ncclrun-dropped.yaml", []string{"no-ipc-lock@16"}, []string{"no-ipc-lock"}},
		{"rules/nonroot-no-caps.yaml", []string{"node-memlock@11"}, []string{"no-ipc-lock"}},
		{"rules/root-default.yaml", []string{"node-memlock@7"}, []string{"root-no-ipc-lock"}},
		{"rules/root-ipc-lock.yaml", []string{"pod-security@12"}, []string{"root-ipc-lock"}},
		{"rules/ncclrun-usage.yaml", []string{"ncclrun-usage@9", "pod-security@12"}, []string{"root-ipc-lock"}},
		{"rules/container-wins.yaml", []string{"pod-security@18"}, []string{"root-ipc-lock"}},
		{"rules/drop-wins.yaml", []string{"node-memlock@7", "pod-security@12"}, []string{"root-no-ipc-lock"}},
		{"rules/ncclrun-drop-cap.yaml", []string{"no-ipc-lock@9", "pod-security@12"}, []string{"dropped"}},
		{"rules/nri-unlimited.yaml", []string{}, []string{"unlimited"}},
		{"rules/nri-finite.yaml", []string{"memlock-limit@6"}, []string{"finite"}},
		{"rules/nri-small.yaml", []string{"memlock-limit@6"}, []string{"no-ipc-lock"}},
		{"rules/userns.yaml", []string{"user-namespace@8", "pod-security@14"}, []string{"userns"}},
		{"rules/userns-finite.yaml", []string{"user-namespace@10"}, []string{"userns"}},
		{"rules/no-shm.yaml", []string{"shm-default@7", "pod-security@12"}, []string{"root-ipc-lock"}},
		{"rules/hostipc.yaml", []string{"pod-security@13"}, []string{"root-ipc-lock"}},
		{"rules/privileged.yaml", []string{"pod-security@7"}, []string{"root-ipc-lock"}},
		{"rules/pod-capabilities.yaml", []string{"pod-capabilities@8", "node-memlock@11"}, []string{"root-no-ipc-lock"}},
		{"compose/compose-trap.yaml", []string{"shm-default@2", "ipc-lock-inert@7"}, []string{"k8s-trap"}},
		{"compose/compose-filecap.yaml", []string{}, []string{"ambient-raise"}},
		{"compose/compose-nnp-exec.yaml", []string{"ipc-lock-inert@10"}, []string{"nnp-file-cap"}},
		{"compose/compose-unlimited.yaml", []string{}, []string{"unlimited"}},
		{"compose/compose-merge-unlimited.yaml", []string{}, []string{"unlimited"}},
		{"compose/compose-merge-trap.yaml", []string{"ipc-lock-inert@7", "shm-default@10"}, []string{"k8s-trap"}},
		{"compose/compose-zero.yaml", []string{"memlock-limit@6"}, []string{"limit-zero"}},
		{"compose/compose-root-user.yaml", []string{"user-needs-setuid@4"}, []string{"no-setuid", "root-no-ipc-lock"}},
		{"compose/compose-way-a.yaml", []string{}, []string{"ambient-raise"}},
		{"knobs/bare-array.json", []string{"ipc-lock-inert@6", "pod-security@6"}, []string{"k8s-trap"}},
		{"knobs/compose-memlock-invalid.yaml", []string{"memlock-limit@16", "memlock-limit@20"}, []string{"root-no-ipc-lock", "root-no-ipc-lock", "unlimited", "unlimited"}},
		{"knobs/compose-user-variable.yaml", []string{"ipc-lock-inert@7"}, []string{"k8s-trap"}},
		{"knobs/dra-cdi-gpu.yaml", []string{"ipc-lock-inert@21", "pod-security@21", "ipc-lock-inert@42", "ipc-lock-inert@54"}, []string{"k8s-trap", "no-ipc-lock", "k8s-trap", "k8s-trap"}},
		{"knobs/ncclrun-memlock-flag.yaml", []string{"memlock-limit@11", "pod-security@25"}, []string{"unlimited", "unlimited"}},
		{"knobs/ncclrun-memlock-usage.yaml", []string{"memlock-limit@11"}, []string{"root-no-ipc-lock"}},
		{"knobs/init-containers.yaml", []string{"pod-security@31", "ipc-lock-inert@17", "pod-security@17"}, []string{"ambient-raise", "k8s-trap", "no-ipc-lock"}},
		{"knobs/kep-16gi.yaml", []string{"memlock-limit@21"}, []string{"finite"}},
		{"knobs/kep-32gi-unprivileged.yaml", []string{"memlock-limit@21"}, []string{"no-ipc-lock"}},
		{"knobs/kep-small.yaml", []string{"memlock-limit@21"}, []string{"no-ipc-lock"}},
		{"knobs/kep-unlimited-privileged.yaml", []string{"pod-security@11", "memlock-limit@21"}, []string{"unlimited"}},
		{"knobs/kep-unlimited-unprivileged.yaml", []string{"memlock-limit@21"}, []string{"no-ipc-lock"}},
		{"knobs/nri-bad-type.yaml", []string{"nri-annotation@6"}, []string{"no-ipc-lock"}},
		{"knobs/nri-both-keys.yaml", []string{"memlock-limit@6"}, []string{"no-ipc-lock"}},
		{"knobs/nri-deprecated-key.yaml", []string{}, []string{"unlimited"}},
		{"knobs/nri-hard-below-soft.yaml", []string{"nri-annotation@6"}, []string{"no-ipc-lock"}},
		{"knobs/nri-negative.yaml", []string{"nri-annotation@6"}, []string{"no-ipc-lock"}},
		{"knobs/nri-on-deployment.yaml", []string{"nri-annotation@6", "node-memlock@18"}, []string{"no-ipc-lock"}},
		{"knobs/nri-other-type-fails.yaml", []string{"nri-annotation@6"}, []string{"no-ipc-lock"}},
		{"knobs/nri-path-typo.yaml", []string{"nri-annotation@6"}, []string{"no-ipc-lock"}},
		{"knobs/nri-string-size.yaml", []string{"nri-annotation@6"}, []string{"no-ipc-lock"}},
		{"knobs/nri-wrong-container.yaml", []string{"nri-annotation@6", "node-memlock@16"}, []string{"no-ipc-lock"}},
		{"knobs/nri-zero.yaml", []string{"nri-annotation@6"}, []string{"limit-zero"}},
		{"knobs/trainjob-list.yaml", []string{"ipc-lock-inert@46", "pod-security@46", "pod-security@46"}, []string{"k8s-trap", "k8s-trap"}},
		{"knobs/trainjob.yaml", []string{"pod-security@30", "ipc-lock-inert@30", "pod-security@30"}, []string{"k8s-trap", "k8s-trap"}},
	}
	seen := map[string]bool{}
	for _, tc := range cases {
		seen[tc.file] = true
		t.Run(tc.file, func(t *testing.T) {
			rep := lintPath(t, filepath.Join("testdata", tc.file))
			assert.Equal(t, tc.want, ids(rep))
			assert.Equal(t, tc.rules, rules(rep))
			for _, f := range rep.Findings {
				assert.NotEmpty(t, f.Message)
				assert.NotEmpty(t, f.Fix)
				assert.True(t, strings.HasSuffix(f.Message, "."), "one sentence: %q", f.Message)
				assert.NotEmpty(t, f.Container)
			}
		})
	}
	for _, d := range []string{"rules", "compose", "knobs"} {
		files, _ := filepath.Glob(filepath.Join("testdata", d, "*.*"))
		for _, f := range files {
			assert.True(t, seen[strings.TrimPrefix(f, "testdata/")], "%s has no row", f)
		}
	}
	// Every finding id and every reachable rule has a manifest.
	gotIDs := map[string]bool{}
	for _, tc := range cases {
		for _, w := range tc.want {
			id, _, _ := strings.Cut(w, "@")
			gotIDs[id] = true
		}
	}
	for _, r := range Rules() {
		assert.True(t, gotIDs[r.ID], "finding %s has a testdata manifest", r.ID)
	}
}

func TestFindingFields(t *testing.T) {
	rep := lintPath(t, "testdata/rules/trap.yaml")
	f := rep.Findings[0]
	assert.Equal(t, Finding{ID: IDIPCLockInert, Severity: Error, File: "testdata/rules/trap.yaml", Line: 18, Object: "Pod/trap",
		Container: "trainer", Message: f.Message, Fix: f.Fix, Rule: pinrule.RuleK8sTrap, Assumed: f.Assumed}, f)
	assert.Contains(t, f.Message, "uid 1000")
	assert.Contains(t, f.Fix, `command: ["/usr/local/bin/ncclrun", "--user=1000:1000", "--", "torchrun", "train.py"]`)
	assert.Contains(t, f.Fix, "ulimits.noderesource.dev/container.trainer: |")
	assert.Contains(t, f.Fix, "soft: 18446744073709551615")
	assert.Contains(t, strings.Join(f.Assumed, "\n"), "finite memlock limit (8 MiB")
	// No command: the image's ENTRYPOINT runs first; an exec-form ncclrun
	// there would hand the capability over, so the trap is a warning.
	ep := lintPath(t, "testdata/rules/trap-args-only.yaml").Findings[0]
	assert.Equal(t, Warning, ep.Severity)
	assert.Contains(t, ep.Message, "unless the image's ENTRYPOINT is ncclrun in exec form")
	// A shell's script: the fix starts what the script ran after ncclrun.
	sh := lintPath(t, "testdata/rules/filecap-tini-nnp.yaml").Findings[0]
	assert.Contains(t, sh.Fix, `command: ["/usr/local/bin/ncclrun", "--", "torchrun", "train.py"]`)
	nr := lintPath(t, "testdata/rules/trap-runasnonroot-only.yaml").Findings[0]
	assert.Contains(t, nr.Message, "the image's non-root user")
	assert.Contains(t, nr.Fix, "--user=UID:GID")
	assert.Contains(t, strings.Join(nr.Assumed, "\n"), "runAsNonRoot: true without runAsUser")
}

// TestPodSecurityFixNRIFirst: pod-security's fix gives the NRI
// annotation (no capability, admitted under restricted) before the
// namespace label that admits the capability.
func TestPodSecurityFixNRIFirst(t *testing.T) {
	for _, f := range lintPath(t, "testdata/rules/trap.yaml").Findings {
		if f.ID != IDPodSecurity {
			continue
		}
		nri, label := strings.Index(f.Fix, "ulimits.noderesource.dev/container.trainer"), strings.Index(f.Fix, "pod-security.kubernetes.io/enforce: privileged")
		require.True(t, nri >= 0 && label >= 0, f.Fix)
		assert.Less(t, nri, label)
		return
	}
	t.Fatal("no pod-security finding")
}

func TestBadInputs(t *testing.T) {
	rep := Paths([]string{"testdata/bad/not-yaml.yaml", "testdata/rules/trap.yaml", "testdata/missing.yaml", "testdata/bad/scalar.txt", "testdata/bad/tabs.yaml"}, nil)
	var msgs []string
	for _, e := range rep.Errors {
		assert.ErrorIs(t, e, ErrInput)
		assert.NotContains(t, e.Error(), "\n")
		msgs = append(msgs, e.Error())
	}
	assert.Equal(t, []string{
		"testdata/bad/not-yaml.yaml: not YAML: line 2: did not find expected ',' or ']'",
		"testdata/missing.yaml: no such file or directory",
		"testdata/bad/scalar.txt: not a YAML or JSON manifest (no mapping at the top)",
		"testdata/bad/tabs.yaml: not YAML: line 2: found a tab character that violates indentation",
	}, msgs)
	assert.Len(t, rep.Containers, 1, "the good input is still checked")
	assert.True(t, rep.HasError())
}

// A document that does not parse ends its input as it ends what kubectl
// apply reads of a file: the documents before it are judged (kubectl
// applies them), the error names the line an editor shows, and the
// documents after it are not read.
func TestBrokenDocumentMidFile(t *testing.T) {
	rep := Paths([]string{"testdata/bad/mid-document.yaml", "testdata/rules/trap.yaml"}, nil)
	require.Len(t, rep.Errors, 1)
	assert.ErrorIs(t, rep.Errors[0], ErrInput)
	assert.Equal(t, "testdata/bad/mid-document.yaml: not YAML: line 26: did not find expected '-' indicator (the document before it is checked, the rest of the input is not read)", rep.Errors[0].Error())
	var objects []string
	for _, c := range rep.Containers {
		objects = append(objects, c.File+" "+c.Object)
	}
	assert.Equal(t, []string{"testdata/bad/mid-document.yaml Pod/before", "testdata/rules/trap.yaml Pod/trap"}, objects)
	assert.Contains(t, rep.Findings, findingOf(rep, "Pod/before", IDIPCLockInert), "the document before the error is judged")
	data, err := os.ReadFile("testdata/bad/mid-document.yaml")
	require.NoError(t, err)
	one, err := CheckBytes("m.yaml", data)
	assert.ErrorIs(t, err, ErrInput)
	require.Len(t, one.Containers, 1, "CheckBytes as Paths")
	assert.Equal(t, "Pod/before", one.Containers[0].Object)

	for _, tc := range []struct{ in, want string }{
		{"a: [1, 2\nb: 3\n", "line 2: did not find expected ',' or ']'"},
		{"a: 1\n b: 2\n", "line 2: mapping values are not allowed in this context"},
		{"kind: Pod\n---\nkind: Pod\n---\nkey: [\n", "line 5: did not find expected node content (the 2 documents before it are checked, the rest of the input is not read)"},
		{"[1, 2", "line 1: did not find expected ',' or ']'"},
		{"a: 1\rb:\r  - x\r  y: 1\r", "line 3: did not find expected '-' indicator"},
		{"a: 1\r\nb:\r\n  - x\r\n  y: 1\r\n", "line 3: did not find expected '-' indicator"},
		{"kind: Pod\nmetadata: {name: a}\n---\nkind: Pod\nkind: Pod\n", `line 5: mapping key "kind" already defined at line 4 (the document before it is checked`},
	} {
		rep, err := CheckBytes("m.yaml", []byte(tc.in))
		assert.ErrorContains(t, err, "m.yaml: not YAML: "+tc.want, tc.in)
		assert.Empty(t, rep.Findings, tc.in)
	}
}

// findingOf is the finding id of object in rep (a zero Finding if none).
func findingOf(rep Report, object, id string) Finding {
	for _, f := range rep.Findings {
		if f.Object == object && f.ID == id {
			return f
		}
	}
	return Finding{}
}

// A stream of JSON objects (jq '.items[]', NDJSON) is read as kubectl
// reads it, one document each, with the lines of the input; a syntax error
// after two values ends it as a YAML one does.
func TestJSONStream(t *testing.T) {
	pod := func(name string, uid int) string {
		return `{"kind":"Pod","metadata":{"name":"` + name + `"},"spec":{"containers":[{"name":"c","command":["torchrun"],` +
			`"securityContext":{"runAsUser":` + strconv.Itoa(uid) + `,"capabilities":{"add":["IPC_LOCK"]}},"resources":{"limits":{"nvidia.com/gpu":1}}}]}}`
	}
	for _, tc := range []struct {
		in      string
		lines   []int // of the ipc-lock-inert findings
		objects []string
		err     string
	}{
		{pod("a", 1000) + "\n" + pod("b", 1000) + "\n", []int{1, 2}, []string{"Pod/a", "Pod/b"}, ""},
		{"\ufeff\n" + pod("a", 1000) + pod("b", 1000), []int{2, 2}, []string{"Pod/a", "Pod/b"}, ""},
		{pod("a", 1000) + "\n" + pod("b", 0) + "\n\n" + pod("c", 1000) + "\n{oops}\n" + pod("d", 1000), []int{1, 4}, []string{"Pod/a", "Pod/b", "Pod/c"},
			"s.json: not JSON: line 5: invalid character 'o' looking for beginning of object key string (the 3 documents before it are checked, the rest of the input is not read)"},
		// A value JSON takes and YAML does not (a lone surrogate escape):
		// the line is the input's, not the value's own.
		{pod("a", 1000) + "\n{\n\"kind\": \"Pod\",\n\"metadata\": {\"name\": \"\\ud800\"}\n}\n", []int{1}, []string{"Pod/a"},
			"s.json: not YAML: line 4: found invalid Unicode character escape code (the document before it is checked, the rest of the input is not read)"},
		// One JSON object then YAML: not a stream; YAML reads the first.
		{pod("a", 1000) + "\n---\nkind: Pod\nmetadata: {name: b}\n", []int{1}, []string{"Pod/a"}, ""},
	} {
		rep := Paths([]string{"-"}, strings.NewReader(tc.in))
		var lines []int
		for _, f := range rep.Findings {
			if f.ID == IDIPCLockInert {
				lines = append(lines, f.Line)
			}
		}
		var objects []string
		for _, c := range rep.Containers {
			objects = append(objects, c.Object)
		}
		assert.Equal(t, tc.lines, lines, tc.in)
		assert.Equal(t, tc.objects, objects, tc.in)
		_, err := CheckBytes("s.json", []byte(tc.in))
		if tc.err == "" {
			assert.NoError(t, err, tc.in)
		} else {
			assert.EqualError(t, err, tc.err)
		}
	}
}

func TestStdinAndDirectories(t *testing.T) {
	data, err := os.ReadFile("testdata/kinds/multi-doc.yaml")
	require.NoError(t, err)
	rep := Paths([]string{"-"}, bytes.NewReader(data))
	require.Empty(t, rep.Errors)
	require.Len(t, rep.Containers, 2)
	assert.Equal(t, "<stdin>", rep.Findings[0].File)

	rep = Paths([]string{"testdata"}, nil)
	assert.Len(t, rep.Errors, 3, "the three unparseable .yaml files of testdata/bad; scalar.txt is not read from a directory")
	var files []string
	for _, c := range rep.Containers {
		files = append(files, c.File)
	}
	assert.True(t, sort.StringsAreSorted(files), "directories are read in name order")
}

func TestText(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, WriteText(&b, lintPath(t, "testdata/rules/nri-unlimited.yaml")))
	assert.Equal(t, "1 container checked, no finding\n", b.String())
	b.Reset()
	require.NoError(t, WriteText(&b, lintPath(t, "testdata/compose")))
	assert.Contains(t, b.String(), "testdata/compose/compose-trap.yaml\n  service/trainer\n    2:    warning  shm-default")
	assert.True(t, strings.HasSuffix(b.String(), "\n10 containers checked: 3 error(s), 4 warning(s), 0 info\n"), b.String())
}

// TestTextPrintable: the text report shows the control characters of the
// names it quotes from a manifest (file, object, container) as escapes,
// so that a manifest cannot drive the terminal that reads the report.
func TestTextPrintable(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ev\x1b[2Jil")
	require.NoError(t, os.Mkdir(dir, 0o755))
	manifest := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: \"p\\e]0;pwned\\x07od\"\nspec:\n  containers:\n  - name: \"tr\\e[2Jainer\"\n" +
		"    securityContext:\n      runAsUser: 1000\n      capabilities:\n        add: [\"IPC_LOCK\"]\n        drop: [\"ALL\"]\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "pod.yaml"), []byte(manifest), 0o644))
	var b bytes.Buffer
	require.NoError(t, WriteText(&b, lintPath(t, dir)))
	out := b.String()
	assert.Contains(t, out, `ev\x1b[2Jil`)
	assert.Contains(t, out, `Pod/p\x1b]0;pwned\x07od`)
	assert.Contains(t, out, `container tr\x1b[2Jainer`)
	assert.NotContains(t, out, "\x1b")
	assert.NotContains(t, out, "\x07")
}

// TestGolden: the JSON and SARIF of testdata/rules and testdata/compose
// (go test ./lint -run Golden -update rewrites them).
func TestGolden(t *testing.T) {
	rep := Paths([]string{"testdata/rules", "testdata/compose"}, nil)
	require.Empty(t, rep.Errors)
	for _, g := range []struct {
		file  string
		write func(*bytes.Buffer) error
	}{
		{"testdata/golden/findings.json", func(b *bytes.Buffer) error { return WriteJSON(b, rep) }},
		{"testdata/golden/findings.sarif", func(b *bytes.Buffer) error { return WriteSARIF(b, rep, "test") }},
	} {
		var b bytes.Buffer
		require.NoError(t, g.write(&b))
		if *update {
			require.NoError(t, os.MkdirAll("testdata/golden", 0o755))
			require.NoError(t, os.WriteFile(g.file, b.Bytes(), 0o644))
		}
		want, err := os.ReadFile(g.file)
		require.NoError(t, err, "go test ./lint -run Golden -update")
		assert.Equal(t, string(want), b.String(), g.file)
	}
}

// TestSARIFShape checks what code scanning needs of SARIF 2.1.0.
func TestSARIFShape(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, WriteSARIF(&b, lintPath(t, "testdata/rules/trap.yaml"), "v1"))
	var s map[string]any
	require.NoError(t, json.Unmarshal(b.Bytes(), &s))
	assert.Equal(t, "2.1.0", s["version"])
	run := s["runs"].([]any)[0].(map[string]any)
	driver := run["tool"].(map[string]any)["driver"].(map[string]any)
	assert.Len(t, driver["rules"], len(Rules()))
	res := run["results"].([]any)
	require.Len(t, res, 2)
	r0 := res[0].(map[string]any)
	assert.Equal(t, "ipc-lock-inert", r0["ruleId"])
	assert.Equal(t, "error", r0["level"])
	loc := r0["locations"].([]any)[0].(map[string]any)["physicalLocation"].(map[string]any)
	assert.Equal(t, "testdata/rules/trap.yaml", loc["artifactLocation"].(map[string]any)["uri"])
	assert.EqualValues(t, 18, loc["region"].(map[string]any)["startLine"])
}

func TestJSONEmpty(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, WriteJSON(&b, Report{}))
	assert.JSONEq(t, `{"findings": []}`, b.String())
}

// FuzzCheck: the YAML entry point never panics and never hangs on any input.
func FuzzCheck(f *testing.F) {
	for _, dir := range []string{"testdata/kinds", "testdata/rules", "testdata/compose", "testdata/knobs", "testdata/trainjob-split", "testdata/bad"} {
		files, _ := filepath.Glob(filepath.Join(dir, "*"))
		for _, p := range files {
			if b, err := os.ReadFile(p); err == nil {
				f.Add(b)
			}
		}
	}
	f.Add([]byte("a: &a [*a]\n"))
	f.Add([]byte("kind: List\nitems: [{kind: List, items: [{kind: Pod, spec: {containers: [{name: x}]}}]}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rep, err := CheckBytes("fuzz.yaml", data)
		if err != nil {
			assert.ErrorIs(t, err, ErrInput)
			return
		}
		for _, fd := range rep.Findings {
			assert.NotEmpty(t, fd.ID)
		}
		var b bytes.Buffer
		assert.NoError(t, WriteText(&b, rep))
		assert.NoError(t, WriteSARIF(&b, rep, "fuzz"))
	})
}
