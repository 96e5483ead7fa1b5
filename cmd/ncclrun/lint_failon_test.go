package main

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestLintFailOn: --fail-on (and NCCLRUN_LINT_FAIL_ON) sets the least
// severity that exits 1; error is the default; SARIF levels do not move.
func TestLintFailOn(t *testing.T) {
	warnOnly := lintData + "/rules/filecap-exec.yaml" // pod-security, not silenced
	infoOnly := lintData + "/rules/root-default.yaml"
	for _, tc := range []struct {
		args []string
		env  []string
		code int
	}{
		{[]string{"lint", warnOnly}, nil, 0},
		{[]string{"lint", "--fail-on", "error", warnOnly}, nil, 0},
		{[]string{"lint", "--fail-on", "warning", warnOnly}, nil, 1},
		{[]string{"lint", "--fail-on=info", warnOnly}, nil, 1},
		{[]string{"lint", "--fail-on", "warning", infoOnly}, nil, 0},
		{[]string{"lint", "--fail-on", "info", infoOnly}, nil, 1},
		{[]string{"lint", warnOnly}, []string{"NCCLRUN_LINT_FAIL_ON=warning"}, 1},
		{[]string{"lint", "--fail-on", "error", warnOnly}, []string{"NCCLRUN_LINT_FAIL_ON=warning"}, 0},
		{[]string{"lint", "--fail-on", "warning", "--format", "sarif", warnOnly}, nil, 1},
	} {
		r := invocation{args: tc.args, env: tc.env}.run(t)
		assert.Equal(t, tc.code, r.code, "%v %v: %s%s", tc.args, tc.env, r.stdout, r.stderr)
		if slices.Contains(tc.args, "sarif") {
			assert.Contains(t, r.stdout, `"level": "warning"`)
		}
	}
	requireUsage(t, ncclrun(t, "lint", "--fail-on", "fatal", warnOnly), `lint --fail-on: "fatal" is not error, warning or info`)
}
