package diagnosis

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// multinodeLog is one node's real output of the multi-node suite
// (testdata/multinode).
func multinodeLog(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "multinode", name))
	require.NoError(t, err)
	return string(b)
}

// node0 is what run knows on the launcher's host: root, memlock
// unlimited, so a registration failure there would not be memlock.
var node0 = Facts{Known: true, Host: "node0", MemlockAdequate: true}

// TestRemoteWarnRepeated: a remote rank's NCCL WARN, and the lines
// without a host that repeat it (NCCL's `Last error:` as the framework
// prints it), are judged without the launcher's own facts.
func TestRemoteWarnRepeated(t *testing.T) {
	ds := explainString(t, multinodeLog(t, "mpirun-remote-nccl-warn.node0.log"), node0)
	require.NotEmpty(t, ds)
	assert.Equal(t, "memlock", ds[0].ID)
	assert.Equal(t, []string{"node1"}, ds[0].Hosts)
	assert.NotContains(t, ids(ds), "memory-registration", "node0's facts judged node1's failure")

	// The same message printed by this host stays this host's.
	local := "node0:25:27 [0] misc/ibvwrap.cc:169 NCCL WARN Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory\n" +
		"[rank0]: Last error:\n[rank0]: Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory\n"
	assert.Equal(t, []string{"memory-registration"}, ids(explainString(t, local, node0)))
}

// TestRemoteWarnRepeatedFirst: the repetition can reach ncclrun before
// the WARN (mpirun relays stdout and stderr on separate pipes); once the
// WARN shows whose it was, the repetition no longer speaks for this host.
func TestRemoteWarnRepeatedFirst(t *testing.T) {
	log := "[rank0]: Last error:\n[rank0]: Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory\n" +
		"node1:25:27 [0] misc/ibvwrap.cc:169 NCCL WARN Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory\n"
	ds := explainString(t, log, node0)
	assert.Equal(t, []string{"memlock"}, ids(ds))
	assert.Equal(t, []string{"node1"}, ds[0].Hosts)
}

// TestExceptionBeforeSiblingsLostPeer: one rank raised, its sibling then
// lost its connection; torch 1.13's summary may name the sibling (same
// second, lower local rank), but the first failure is what came first.
func TestExceptionBeforeSiblingsLostPeer(t *testing.T) {
	for _, tt := range []struct {
		name string
		log  string
	}{
		{"as torch picked it", multinodeLog(t, "torchrun-exception.node1.log")},
		{"torch named the sibling", strings.Join([]string{
			"Traceback (most recent call last):",
			`  File "/harness/mn.py", line 30, in main`,
			"RuntimeError: rank 3 failed on purpose",
			"Traceback (most recent call last):",
			`  File "/harness/mn.py", line 33, in main`,
			"RuntimeError: [./gloo/transport/tcp/pair.cc:598] Connection closed by peer [198.18.0.2]:17069",
			"Root Cause (first observed failure):",
			"[0]:",
			"  time      : 2026-12-02_04:36:59",
			"  host      : node1",
			"  rank      : 2 (local_rank: 0)",
			"  exitcode  : 1 (pid: 14)",
			"  traceback : Traceback (most recent call last):",
			"  RuntimeError: [./gloo/transport/tcp/pair.cc:598] Connection closed by peer [198.18.0.2]:17069",
		}, "\n") + "\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMatcher(Facts{Known: true, Host: "node1"})
			require.NoError(t, FeedReader(m, strings.NewReader(tt.log)))
			f := m.FirstFailure()
			require.NotNil(t, f)
			assert.Empty(t, f.ID, "the program's exception: %+v", f)
			assert.Contains(t, f.Line, "rank 3 failed on purpose")
			for _, d := range m.Diagnoses() {
				assert.NotEmpty(t, d.KnockOnOf, "a consequence of the exception: %+v", d)
			}
		})
	}
}

// TestUnsureHostNotAnnounced: a registration failure on a line that
// shows no host, which this host's memlock alone turned into
// memory-registration, is not announced while CMD runs (the WARN it may
// repeat can still come on another pipe); it stays in Diagnoses.
func TestUnsureHostNotAnnounced(t *testing.T) {
	m := NewMatcher(node0)
	got := m.FeedAll([]byte("[rank0]: Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory\n"))
	assert.Empty(t, got, "announced before its host is known")
	assert.Equal(t, []string{"memory-registration"}, ids(m.Diagnoses()))
	got = m.FeedAll([]byte("node1:25:27 [0] misc/ibvwrap.cc:169 NCCL WARN Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory\n"))
	assert.Equal(t, []string{"memlock"}, ids(got))
	assert.Equal(t, []string{"memlock"}, ids(m.Diagnoses()))
	// This host's own WARN is announced at once.
	m = NewMatcher(node0)
	assert.Equal(t, []string{"memory-registration"}, ids(m.FeedAll([]byte("node0:25:27 [0] misc/ibvwrap.cc:169 NCCL WARN Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory\n"))))
}
