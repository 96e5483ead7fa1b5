package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// memLimitHelperEnv makes the test binary print the memory limit that
// setMemoryLimit leaves instead of running tests.
const memLimitHelperEnv = "NCCLRUN_MEMLIMIT_HELPER"

func init() {
	if os.Getenv(memLimitHelperEnv) == "" {
		return
	}
	setMemoryLimit()
	fmt.Println(debug.SetMemoryLimit(-1))
	os.Exit(0)
}

// TestMemoryLimit: ncclrun runs under memoryLimit, unless GOMEMLIMIT
// gives another (the Go runtime's own variable, which then wins).
func TestMemoryLimit(t *testing.T) {
	for _, c := range []struct {
		name string
		env  []string
		want int64
	}{
		{"default", nil, memoryLimit},
		{"GOMEMLIMIT", []string{"GOMEMLIMIT=64MiB"}, 64 << 20},
		{"GOMEMLIMIT off", []string{"GOMEMLIMIT=off"}, 1<<63 - 1},
		{"GOMEMLIMIT empty", []string{"GOMEMLIMIT="}, memoryLimit}, // the runtime reads it as unset
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append([]string{memLimitHelperEnv + "=1", "PATH=" + os.Getenv("PATH")}, c.env...)
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", out)
			assert.Equal(t, fmt.Sprint(c.want), strings.TrimSpace(string(out)))
		})
	}
}

// TestMalformedMemoryLimit: the Go runtime parses GOMEMLIMIT before main,
// so a value it cannot parse stops ncclrun with the runtime's own error
// and status 2, before CMD starts; docs/cli.md says so, and which forms
// are accepted.
func TestMalformedMemoryLimit(t *testing.T) {
	doc, err := os.ReadFile("../../docs/cli.md")
	require.NoError(t, err)
	for _, w := range []string{"fatal error: malformed GOMEMLIMIT", "`KiB`, `MiB`, `GiB` or `TiB`", "exit status 2"} {
		assert.Contains(t, strings.Join(strings.Fields(string(doc)), " "), w, "docs/cli.md")
	}
	for _, v := range []string{"64MB", "garbage"} {
		t.Run(v, func(t *testing.T) {
			started := filepath.Join(t.TempDir(), "started")
			r := invocation{args: []string{"--quiet", "--", "touch", started},
				env: []string{"GOMEMLIMIT=" + v}}.run(t)
			assert.Equal(t, 2, r.code, "stderr: %q", r.stderr)
			assert.Contains(t, r.stderr, "fatal error: malformed GOMEMLIMIT")
			assert.NoFileExists(t, started, "CMD did not start")
		})
	}
}
