package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ncclrun/ncclrun/preflight"
)

// TestRunPreflightVersionOnDemand: run's preflight lists the library
// directories for NCCL's version only when --report will show it (or a
// rule needs it: an unlimited stack limit here).
func TestRunPreflightVersionOnDemand(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "libnccl.so.2.27.3"), nil, 0o644))
	var lim unix.Rlimit
	require.NoError(t, unix.Getrlimit(unix.RLIMIT_STACK, &lim))
	needed := lim.Cur == unix.RLIM_INFINITY
	cases := []struct {
		name   string
		report string
		want   bool // the version is read and reported
	}{
		{name: "no --report", want: needed},
		{name: "--report", report: filepath.Join(t.TempDir(), "report.json"), want: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			e := &env{stderr: &stderr, environ: []string{"PATH=/usr/bin:/bin", "LD_LIBRARY_PATH=" + dir}}
			j := runJob{s: settings{report: tc.report, quiet: true}, path: "/bin/true"}
			rep, err := runPreflight(context.Background(), e, j, nil)
			require.NoError(t, err)
			r, ok := rep.Check(preflight.IDEnvSanity)
			require.True(t, ok)
			if tc.want {
				assert.Equal(t, "2.27.3", rep.Facts.NCCLVersion.String())
				assert.Equal(t, "2.27.3", r.Details["nccl_version"])
				return
			}
			assert.False(t, rep.Facts.NCCLVersion.Known())
			assert.NotContains(t, r.Details, "nccl_version")
		})
	}
}
