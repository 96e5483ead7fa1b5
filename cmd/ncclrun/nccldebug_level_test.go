package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNCCLDebugLevel: --nccl-debug takes a level NCCL knows (VERSION,
// WARN, INFO, ABORT, TRACE, in any case); NCCL reads any other value as
// "print nothing", so a typo would silence the very warnings ncclrun
// diagnoses: it is a usage error naming the flag.
func TestNCCLDebugLevel(t *testing.T) {
	root := fakeTree(t, 0, "unlimited", "unlimited", "00000000a80425fb")
	for _, tc := range []struct {
		level string
		ok    bool
		want  string
	}{
		{"WARN", true, "WARN"},
		{"info", true, "info"},
		{" Trace ", true, "Trace"},
		{"VERSION", true, "VERSION"},
		{"ABORT", true, "ABORT"},
		{"IFNO", false, `--nccl-debug: "IFNO" is not a level NCCL knows`},
		{"WARN,INFO", false, "is not a level NCCL knows"},
		{"", false, "empty level"},
		{"IN\x1b[2JFO", false, `"IN\x1b[2JFO"`},
	} {
		t.Run(tc.level, func(t *testing.T) {
			r := ncclrun(t, "env", "--root", root, "--nccl-debug", tc.level)
			if !tc.ok {
				requireUsage(t, r, tc.want)
				return
			}
			require.Equal(t, 0, r.code, r.stderr)
			assert.Contains(t, r.stdout, "export NCCL_DEBUG='"+tc.want+"'")
		})
	}
	r := invocation{args: []string{"run", "--root", root, "--", "true"}, env: []string{"NCCLRUN_NCCL_DEBUG=WRAN"}}.run(t)
	requireUsage(t, r, `"WRAN" is not a level NCCL knows`)
}
