package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ncclrun/ncclrun/internal/testutil"
)

// measured is one run of the real binary with its peak RSS.
type measured struct {
	code           int
	stdout, stderr string
	maxRSS         int64 // bytes
}

// runMeasured runs the ncclrun binary with args and returns its output,
// exit status and peak resident set size: from /usr/bin/time -f %M when
// it is there (a small C parent, so the figure is ncclrun's own), else from
// getrusage of the child, which on Linux can include the forking test
// binary's pages and is only an upper bound.
func runMeasured(t *testing.T, args ...string) measured {
	t.Helper()
	argv := append([]string{bin}, args...)
	rssFile := ""
	if _, err := os.Stat("/usr/bin/time"); err == nil {
		rssFile = filepath.Join(t.TempDir(), "rss")
		argv = append([]string{"/usr/bin/time", "-o", rssFile, "-f", "%M"}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = baseEnv(t)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("start ncclrun %q: %v", args, err)
	}
	m := measured{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errb.String()}
	if rssFile != "" {
		data, err := os.ReadFile(rssFile)
		require.NoError(t, err)
		// time(1) prefixes "Command exited with non-zero status N" lines.
		f := strings.Fields(string(data))
		require.NotEmpty(t, f)
		kib, err := strconv.ParseInt(f[len(f)-1], 10, 64)
		require.NoError(t, err, "%q", data)
		m.maxRSS = kib << 10
		if cmd.ProcessState.ExitCode() != 0 {
			// time exits with the command's status.
			m.code = cmd.ProcessState.ExitCode()
		}
		return m
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	require.True(t, ok)
	m.maxRSS = ru.Maxrss << 10
	return m
}

// rssGrowth is how far past the peak RSS of explaining a one-line log,
// measured once in the same test run, a large or hostile input may take
// ncclrun. State that grew with the input (its lines, ranks, processes,
// a decoder's declared window) would pass it by tens of MiB on the inputs
// the tests give. A fixed figure holds on one machine only: the binary's
// touched pages and the kernel's huge-page setting differ from machine
// to machine. The 16 MiB target is make bench's, which prints the
// machine's own figures (docs/performance.md).
const rssGrowth = 6 << 20

var oneLine struct {
	sync.Once
	rss int64
}

// assertRSSBounded asserts that m peaked within rssGrowth of a one-line
// explain's peak RSS. Without /usr/bin/time (GNU time) the figures are
// upper bounds that include the test binary's pages: the test is then
// skipped after its other checks (failed under CI=true).
func assertRSSBounded(t *testing.T, m measured) {
	t.Helper()
	oneLine.Do(func() {
		p := filepath.Join(t.TempDir(), "one.log")
		require.NoError(t, os.WriteFile(p, []byte("host:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"), 0o644))
		oneLine.rss = runMeasured(t, "explain", p).maxRSS
	})
	t.Logf("peak RSS %d KiB, a one-line explain's %d KiB", m.maxRSS>>10, oneLine.rss>>10)
	if _, err := os.Stat("/usr/bin/time"); err != nil {
		testutil.SkipOrFail(t, "/usr/bin/time (GNU time) is not installed: no peak RSS of ncclrun's own")
	}
	require.NotZero(t, oneLine.rss, "the one-line explain, measured first, gave no figure")
	assert.Less(t, m.maxRSS, oneLine.rss+rssGrowth, "peak RSS %d KiB, a one-line explain's %d KiB", m.maxRSS>>10, oneLine.rss>>10)
}

// TestExplainBoundedSummary: WARN lines from ever new processes on ever
// new hosts give a bounded summary (it was a 29 MB line for a million) in
// bounded memory, and the JSON says that count and hosts were capped.
func TestExplainBoundedSummary(t *testing.T) {
	var b bytes.Buffer
	for i := 0; i < 50_000; i++ {
		fmt.Fprintf(&b, "node-%d:%d:%d [0] misc/ibvwrap.cc:190 NCCL WARN Call to ibv_create_cq failed with error Cannot allocate memory\n", i, 1000+i, i)
	}
	p := filepath.Join(t.TempDir(), "many.log")
	require.NoError(t, os.WriteFile(p, b.Bytes(), 0o644))

	r := runMeasured(t, "explain", p)
	require.Equal(t, 0, r.code, r.stderr)
	// The catalog's own texts (cause, fix) are as long as they are; what
	// the log decides (who reported it) is bounded.
	assert.LessOrEqual(t, len(r.stdout), 8<<10)
	for _, l := range strings.Split(r.stdout, "\n") {
		if strings.HasPrefix(l, "  seen:") {
			assert.LessOrEqual(t, len(l), 1024, "line %.200q...", l)
		}
	}
	assert.Contains(t, r.stdout, "4096+ processes on node-0, node-1, ")
	assert.Contains(t, r.stdout, "and 1016+ more (50000 lines)")
	assertRSSBounded(t, r)

	r = runMeasured(t, "explain", "--json", p)
	require.Equal(t, 0, r.code, r.stderr)
	var out struct {
		Diagnoses []struct {
			Count       int      `json:"count"`
			CountCapped bool     `json:"count_capped"`
			Hosts       []string `json:"hosts"`
			HostsCapped bool     `json:"hosts_capped"`
		} `json:"diagnoses"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &out))
	require.Len(t, out.Diagnoses, 1)
	d := out.Diagnoses[0]
	assert.Equal(t, 4096, d.Count)
	assert.True(t, d.CountCapped)
	assert.Len(t, d.Hosts, 1024)
	assert.True(t, d.HostsCapped)

	// The same log through the gzip decoder: the same summary, the
	// decoder's 32 KiB window on top of the matcher's bounded state.
	zp := filepath.Join(t.TempDir(), "many.gz")
	require.NoError(t, os.WriteFile(zp, gzipBytes(t, b.Bytes()), 0o644))
	rz := runMeasured(t, "explain", "--json", zp)
	require.Equal(t, 0, rz.code, rz.stderr)
	assert.JSONEq(t, r.stdout, rz.stdout)
	assertRSSBounded(t, rz)
}
