package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const lintData = "../../lint/testdata"

// TestLintExitStatus: 0 without an error finding, 1 with one, 2 for usage
// or an input that cannot be read or parsed (one stderr line each, the
// other inputs still checked).
func TestLintExitStatus(t *testing.T) {
	r := ncclrun(t, "lint", "../../examples/kubernetes/b-nonroot-filecap.yaml")
	assert.Equal(t, 0, r.code, "warnings only: %s", r.stdout)
	assert.Empty(t, r.stderr)

	r = ncclrun(t, "lint", "../../examples/kubernetes/seed-trap.yaml")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stdout, "ipc-lock-inert")

	r = ncclrun(t, "lint", lintData+"/rules/nri-unlimited.yaml")
	assert.Equal(t, 0, r.code)
	assert.Equal(t, "1 container checked, no finding\n", r.stdout)

	// An input that could not be read is never summed up as "no finding".
	r = ncclrun(t, "lint", "no/such/file.yaml")
	assert.Equal(t, ExitUsage, r.code)
	assert.Equal(t, "0 containers checked; 1 input could not be read (see stderr)\n", r.stdout)
	r = ncclrun(t, "lint", lintData+"/rules/nri-unlimited.yaml", "no/such/file.yaml", lintData+"/bad/not-yaml.yaml")
	assert.Equal(t, ExitUsage, r.code)
	assert.Equal(t, "1 container checked; 2 inputs could not be read (see stderr)\n", r.stdout)

	r = ncclrun(t, "lint", "--format", "json", lintData+"/bad/not-yaml.yaml", "../../examples/kubernetes/seed-trap.yaml", "no/such/file.yaml")
	assert.Equal(t, ExitUsage, r.code)
	require.Len(t, r.errLines(), 2, r.stderr)
	assert.Equal(t, "ncclrun: lint: "+lintData+"/bad/not-yaml.yaml: not YAML: line 2: did not find expected ',' or ']'", r.errLines()[0])
	assert.Equal(t, "ncclrun: lint: no/such/file.yaml: no such file or directory", r.errLines()[1])
	var doc struct {
		Findings []map[string]any `json:"findings"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &doc), r.stdout)
	assert.Len(t, doc.Findings, 2, "the good input is still checked")

	// No FILE: stdin, unless it is a terminal or a device.
	null := exec.Command(bin, "lint")
	null.Env = baseEnv(t)
	var out, errb bytes.Buffer
	null.Stdout, null.Stderr = &out, &errb
	if f, err := os.Open(os.DevNull); assert.NoError(t, err) {
		defer f.Close()
		null.Stdin = f
	}
	err := null.Run()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	requireUsage(t, result{code: ee.ExitCode(), stdout: out.String(), stderr: errb.String()}, "lint needs a FILE, DIR or -: stdin is not a pipe or a file")
	requireUsage(t, ncclrun(t, "lint", "--format", "xml", "x.yaml"), `"xml" is not text, json or sarif`)
}

// TestLintStdin is `helm template ... | ncclrun lint -`, and the same
// without the -.
func TestLintStdin(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(lintData, "kinds", "multi-doc.yaml"))
	require.NoError(t, err)
	for _, args := range [][]string{{"lint", "--format", "sarif", "-"}, {"lint", "--format", "sarif"}} {
		r := invocation{args: args, stdin: string(data)}.run(t)
		assert.Equal(t, 1, r.code, r.stderr)
		var s map[string]any
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &s))
		assert.Equal(t, "2.1.0", s["version"])
		assert.Contains(t, r.stdout, `"uri": "<stdin>"`)
	}
}

// TestLintStdinTwice: stdin is one input; naming it twice is a usage
// error, as explain's is, not a second read of an emptied pipe.
func TestLintStdinTwice(t *testing.T) {
	r := invocation{args: []string{"lint", "-", "-"}, stdin: "apiVersion: v1\nkind: Pod\n"}.run(t)
	assert.Equal(t, ExitUsage, r.code, r.stderr)
	assert.Contains(t, r.stderr, "given twice")
}

// TestLintExamplesDir is `ncclrun lint examples/` as the docs show it.
func TestLintExamplesDir(t *testing.T) {
	r := ncclrun(t, "lint", "../../examples/")
	assert.Equal(t, 1, r.code, "the seed's trap is the one error: %s", r.stdout)
	assert.Empty(t, r.stderr)
	assert.Equal(t, 1, strings.Count(r.stdout, " error "), r.stdout)
}

// TestLintDocOutput: docs/lint.md's "The trap, and its fix, as lint sees
// them" shows the real output (regenerate it with the command it shows,
// run from the root).
func TestLintDocOutput(t *testing.T) {
	doc, err := os.ReadFile("../../docs/lint.md")
	require.NoError(t, err)
	for _, f := range []string{"examples/kubernetes/seed-trap.yaml", "examples/kubernetes/b-nonroot-filecap.yaml"} {
		_, after, ok := strings.Cut(string(doc), "    ncclrun lint "+f)
		require.True(t, ok, "docs/lint.md shows `ncclrun lint %s`", f)
		_, block, ok := strings.Cut(after, "```\n")
		require.True(t, ok)
		block, _, ok = strings.Cut(block, "```\n")
		require.True(t, ok)
		r := invocation{args: []string{"lint", f}, dir: "../.."}.run(t)
		assert.Equal(t, r.stdout, block, "docs/lint.md's output of `ncclrun lint %s` is stale", f)
	}
}
