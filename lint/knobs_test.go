package lint

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/ncclrun/ncclrun/internal/pinrule"
)

// TestNRIDecode: the annotation's value as the ulimit-adjuster decodes it
// (YAML to JSON, then {type string; soft, hard uint64}).
func TestNRIDecode(t *testing.T) {
	u := int64(pinrule.Unlimited)
	cases := []struct {
		name, value string
		fails       bool
		memlock     *pinrule.Limit
		problem     string // a clause of the finding ("" none)
	}{
		{"unlimited", "- {type: RLIMIT_MEMLOCK, soft: 18446744073709551615, hard: 18446744073709551615}", false, &pinrule.Limit{Soft: u, Hard: u}, ""},
		{"lower case without prefix", "[{type: memlock, soft: 1073741824, hard: 1073741824}]", false, &pinrule.Limit{Soft: 1 << 30, Hard: 1 << 30}, ""},
		{"rlimit lower case", "[{type: rlimit_memlock, soft: 1, hard: 2}]", false, &pinrule.Limit{Soft: 1, Hard: 2}, ""},
		{"fields fold case as encoding/json does", "[{Type: MEMLOCK, SOFT: 5, Hard: 5}]", false, &pinrule.Limit{Soft: 5, Hard: 5}, ""},
		{"minus one", "[{type: RLIMIT_MEMLOCK, soft: -1, hard: -1}]", true, nil, "soft: -1 is not an unsigned 64-bit integer"},
		{"quoted number", `[{type: RLIMIT_MEMLOCK, soft: "1024", hard: 1024}]`, true, nil, `soft: "1024" is not`},
		{"fraction", "[{type: RLIMIT_MEMLOCK, soft: 1.5, hard: 2}]", true, nil, "soft: 1.5 is not"},
		{"above uint64", "[{type: RLIMIT_MEMLOCK, soft: 18446744073709551616, hard: 1}]", true, nil, "soft: 18446744073709551616 is not"},
		{"path instead of type", "[{path: RLIMIT_MEMLOCK, soft: 1, hard: 1}]", true, nil, "no type (the plugin does not read `path`)"},
		{"misspelled type", "[{type: RLIMIT_MEMLOK, soft: 1, hard: 1}]", true, nil, `type "RLIMIT_MEMLOK" is not a resource name`},
		{"type not a string", "[{type: 8, soft: 1, hard: 1}]", true, nil, `type "8" is not a string`},
		{"hard below soft", "[{type: memlock, soft: 2, hard: 1}]", true, nil, "RLIMIT_MEMLOCK has hard 1 below soft 2"},
		{"missing hard is 0, below soft", "[{type: memlock, soft: 2}]", true, nil, "hard 0 below soft 2"},
		{"missing both is 0/0", "[{type: memlock}]", false, &pinrule.Limit{}, "no soft and no hard, which the plugin reads as 0"},
		{"written zero", "[{type: memlock, soft: 0, hard: 0}]", false, &pinrule.Limit{}, "a memlock of 0"},
		{"another type fails too", "[{type: memlock, soft: 1, hard: 1}, {type: NOFILE, soft: 9, hard: 8}]", true, nil, "RLIMIT_NOFILE has hard 8 below soft 9"},
		{"not a list", "{type: memlock, soft: 1, hard: 1}", true, nil, "not a YAML list"},
		{"not YAML", "[{type: memlock", true, nil, "not YAML"},
		{"empty", "", false, nil, ""},
		{"null", "null", false, nil, ""},
		{"no memlock", "[{type: NOFILE, soft: 1024, hard: 4096}]", false, nil, ""},
		{"the last memlock wins", "[{type: memlock, soft: 1, hard: 1}, {type: RLIMIT_MEMLOCK, soft: 7, hard: 7}]", false, &pinrule.Limit{Soft: 7, Hard: 7}, ""},
		{"hex is an integer", "[{type: memlock, soft: 0x10, hard: 0x10}]", false, &pinrule.Limit{Soft: 16, Hard: 16}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := readNRI(nriKey+"c", "c", 1, tc.value)
			assert.Equal(t, tc.fails, a.fails, a.problems)
			assert.Equal(t, tc.memlock, a.memlock)
			if tc.problem == "" {
				assert.Empty(t, a.problems)
				return
			}
			assert.Contains(t, strings.Join(a.problems, "; "), tc.problem)
			// The fix is an annotation the plugin accepts.
			fixed := fixValue(t, a.corrected("c"), nriKey+"c")
			b := readNRI(nriKey+"c", "c", 1, fixed)
			assert.Empty(t, b.problems, fixed)
		})
	}
}

// TestNRINotAString: an annotation written as a YAML list, not a string.
func TestNRINotAString(t *testing.T) {
	rep, err := CheckBytes("p.yaml", []byte("kind: Pod\nmetadata:\n  name: p\n  annotations:\n    ulimits.noderesource.dev/container.c:\n      - {type: memlock, soft: 1, hard: 1}\nspec:\n  containers:\n    - name: c\n"))
	require.NoError(t, err)
	require.Len(t, rep.Findings, 1)
	assert.Equal(t, IDNRIAnnotation, rep.Findings[0].ID)
	assert.Contains(t, rep.Findings[0].Message, "not a string")
	assert.Contains(t, rep.Findings[0].Fix, "ulimits.noderesource.dev/container.c: |\n      - type: RLIMIT_MEMLOCK\n        soft: 1\n        hard: 1")
}

// fixValue is the annotation value of a fix's YAML.
func fixValue(t *testing.T, fix, key string) string {
	t.Helper()
	var doc yaml.Node
	require.NoError(t, yaml.Unmarshal([]byte(fix), &doc), fix)
	v := path(doc.Content[0], "metadata", "annotations", key)
	require.NotNil(t, v, fix)
	return v.Value
}

// TestNRIFixes: each knobs manifest's nri-annotation fix is the annotation
// corrected: the key of the container, every value a uint64, the type a
// name the plugin knows, and memlock unlimited where it was meant to be.
func TestNRIFixes(t *testing.T) {
	for _, f := range []string{"nri-negative", "nri-path-typo", "nri-wrong-container", "nri-hard-below-soft", "nri-zero", "nri-bad-type", "nri-string-size"} {
		t.Run(f, func(t *testing.T) {
			rep := lintPath(t, "testdata/knobs/"+f+".yaml")
			require.NotEmpty(t, rep.Findings)
			fd := rep.Findings[0]
			require.Equal(t, IDNRIAnnotation, fd.ID)
			a := readNRI(nriKey+"trainer", "trainer", 1, fixValue(t, fd.Fix, nriKey+"trainer"))
			assert.Empty(t, a.problems)
			require.NotNil(t, a.memlock, fd.Fix)
			if f == "nri-string-size" {
				assert.Equal(t, pinrule.Limit{Soft: 64 << 30, Hard: 64 << 30}, *a.memlock)
			} else if f == "nri-hard-below-soft" {
				assert.Equal(t, pinrule.Limit{Soft: pinrule.Unlimited, Hard: pinrule.Unlimited}, *a.memlock)
			}
		})
	}
	assert.Equal(t, uint64(math.MaxUint64), uint64(18446744073709551615))
}

// TestKEPUlimits: securityContext.ulimits is judged by the same table and
// every finding names the feature gate and the validation's rules.
func TestKEPUlimits(t *testing.T) {
	for _, f := range []string{"kep-small", "kep-16gi", "kep-unlimited-unprivileged", "kep-32gi-unprivileged", "kep-unlimited-privileged"} {
		rep := lintPath(t, "testdata/knobs/"+f+".yaml")
		var fd *Finding
		for i := range rep.Findings {
			if rep.Findings[i].ID == IDMemlockLimit {
				fd = &rep.Findings[i]
			}
		}
		require.NotNil(t, fd, f)
		assert.Contains(t, fd.Message, "ContainerUlimits feature gate", f)
		assert.Contains(t, fd.Message, "1.38", f)
		assert.Contains(t, fd.Message, "16 GiB", f)
		assert.Contains(t, fd.Message, "-1 (unlimited) only for a privileged one", f)
		want := map[string]string{"kep-small": Error, "kep-16gi": Warning, "kep-unlimited-unprivileged": Error, "kep-32gi-unprivileged": Error, "kep-unlimited-privileged": Info}[f]
		assert.Equal(t, want, fd.Severity, f)
	}
	// The nofile entry beside memlock is not a memlock limit.
	rep := lintPath(t, "testdata/knobs/kep-small.yaml")
	assert.Equal(t, pinrule.Limit{Soft: 65536, Hard: 65536}, rep.Containers[0].Cred.Memlock)
}

// TestTrainJobAcrossFiles: a TrainJob and its runtime in two files of one
// directory are judged together; the TrainJob's findings point at its own
// file, at spec.trainer for what the runtime gave. Alone, it gives nothing.
// A Compose ulimits.memlock that Compose or Docker refuses names its
// service and why; the fix is the value Docker takes.
func TestComposeMemlockRefused(t *testing.T) {
	rep := lintPath(t, "testdata/knobs/compose-memlock-invalid.yaml")
	require.Len(t, rep.Findings, 2)
	assert.Equal(t, "ulimits.memlock of service soft-above-hard sets soft -1 (unlimited) above hard 68719476736, which setrlimit refuses (EINVAL), so Docker does not start the container.", rep.Findings[0].Message)
	assert.Equal(t, `ulimits.memlock of service size-string is not what Compose reads (the value "64g" is not an integer), so docker compose refuses the file.`, rep.Findings[1].Message)
	for _, f := range rep.Findings {
		assert.Equal(t, Error, f.Severity)
		assert.Contains(t, f.Fix, "memlock: {soft: -1, hard: -1}")
	}
	for in, want := range map[string]string{
		"{soft: 1024}":                "(hard is missing)",
		"{soft: 1048576, hard: 1024}": "sets soft 1048576 above hard 1024",
		"{soft: -1, hard: -2}":        "sets soft -1 (unlimited) above hard -2",
		"[1, 2]":                      "(the value is not an integer)",
		"{soft: 1.5e9, hard: -1}":     `(soft "1.5e9" is not an integer)`,
	} {
		rep, err := CheckBytes("c.yaml", []byte("services:\n  t:\n    gpus: all\n    shm_size: 1g\n    ulimits:\n      memlock: "+in+"\n"))
		require.NoError(t, err)
		if assert.Len(t, rep.Findings, 1, in) {
			assert.Contains(t, rep.Findings[0].Message, "ulimits.memlock of service t ", in)
			assert.Contains(t, rep.Findings[0].Message, want, in)
		}
	}
}

// A Compose user taken from the environment is named whole, not cut at
// its default's colon.
func TestComposeUserVariable(t *testing.T) {
	rep := lintPath(t, "testdata/knobs/compose-user-variable.yaml")
	require.Len(t, rep.Findings, 1)
	assert.Contains(t, rep.Findings[0].Message, `IPC_LOCK is added for user "${UID:-1000}", but`)
	assert.Contains(t, rep.Findings[0].Assumed, "the container's uid is not root but unknown (user: ${UID:-1000}, which Compose takes from the environment); `id` in the container shows it")
}

func TestTrainJobAcrossFiles(t *testing.T) {
	rep := lintPath(t, "testdata/trainjob-split")
	var got []string
	for _, f := range rep.Findings {
		if f.Object == "TrainJob/llama" {
			got = append(got, f.File+":"+itoa(f.Line)+":"+f.ID)
		}
	}
	assert.Equal(t, []string{
		"testdata/trainjob-split/a-trainjob.yaml:8:ipc-lock-inert",
		"testdata/trainjob-split/a-trainjob.yaml:8:pod-security",
	}, got)
	alone := lintPath(t, "testdata/trainjob-split/a-trainjob.yaml")
	assert.Empty(t, alone.Containers)
	// The trainer's command and GPUs replace the runtime's.
	for _, c := range rep.Containers {
		if c.Object == "TrainJob/llama" {
			assert.True(t, c.GPU)
		} else {
			assert.False(t, c.GPU, c.Object)
		}
	}
}

// TestFailsAt is --fail-on.
func TestFailsAt(t *testing.T) {
	warnOnly := lintPath(t, "testdata/knobs/kep-16gi.yaml")
	infoOnly := lintPath(t, "testdata/rules/root-default.yaml")
	for _, tc := range []struct {
		rep  Report
		sev  string
		want bool
	}{
		{warnOnly, Error, false}, {warnOnly, Warning, true}, {warnOnly, Info, true},
		{infoOnly, Error, false}, {infoOnly, Warning, false}, {infoOnly, Info, true},
		{Report{}, Info, false},
	} {
		got, err := tc.rep.FailsAt(tc.sev)
		require.NoError(t, err)
		assert.Equal(t, tc.want, got, tc.sev)
	}
	_, err := warnOnly.FailsAt("fatal")
	assert.ErrorIs(t, err, ErrSeverity)
}
