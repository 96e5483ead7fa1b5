//go:build acceptance

package acceptance

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hangReport is what the hang test reads of --report and explain --json.
type hangReport struct {
	ExitCode int `json:"exit_code"`
	Hang     *struct {
		Waited  []int `json:"waited"`
		Stalled []struct {
			Rank int    `json:"rank"`
			Host string `json:"host"`
		} `json:"stalled"`
		Certainty string `json:"certainty"`
	} `json:"hang"`
	FirstFailure *struct {
		Rank *int   `json:"rank"`
		Host string `json:"host"`
	} `json:"first_failure"`
}

func readHang(t *testing.T, b []byte) hangReport {
	t.Helper()
	var r hangReport
	require.NoError(t, json.Unmarshal(b, &r), "%s", b)
	require.NotNil(t, r.Hang, "no hang in %s", b)
	return r
}

// hangTolerance is how far apart a node of the hang test may end, plain
// and through ncclrun: five side-by-side runs at load 3-6 ended within
// 1.6 s of each other (docs/hangs.md, "Costs"); torchrun's rendezvous
// varies that much by itself on a loaded 2-core machine.
const hangTolerance = 8 * time.Second

// Promise: one rank of a two-node torchrun job (gloo, torch 1.13) stops
// before a collective and the others' collective times out: the node
// that held it names that rank and its host in its report and
// termination message, the other node says the rank it waited for ran
// elsewhere, and explain over every node's output together names rank
// and host; the exit status and timing of every node are as without
// ncclrun.
func TestMultinodeHangGloo(t *testing.T) {
	const stall = 1
	// The agents look at their workers every 4 s: a rank that waited in
	// the collective prints its own timeout before its agent stops it
	// for another local rank's exit. Every second, on a loaded machine,
	// rank 2 could be stopped first, and its silence read as the stall.
	plain, via := pair(t, 2, 2, "mn.py", func(int) []string {
		return []string{"MODE=stall", "STALL_RANK=1", "GLOO_TIMEOUT=5", "MONITOR_INTERVAL=4"}
	}, nil)
	for i := range via {
		t.Logf("%s: exit %d in %v plain, exit %d in %v through ncclrun", via[i].host, plain[i].code, plain[i].took, via[i].code, via[i].took)
	}
	// Within a few seconds of plain, either way: ncclrun's own part is its
	// preflight and its summary (under a second together); the rest is two
	// clusters starting side by side on a shared machine (docs/hangs.md).
	for i := range via {
		near(t, plain[i], via[i], hangTolerance)
	}
	var held, other *proc
	for _, p := range via {
		b, err := os.ReadFile(p.report)
		require.NoError(t, err, "%s wrote no report", p.host)
		r := readHang(t, b)
		if len(r.Hang.Stalled) > 0 && r.Hang.Stalled[0].Host == p.host {
			held = p
			assert.Equal(t, stall, r.Hang.Stalled[0].Rank, "%s", b)
			require.NotNil(t, r.FirstFailure, "%s", b)
			require.NotNil(t, r.FirstFailure.Rank, "%s", b)
			assert.Equal(t, stall, *r.FirstFailure.Rank, "the stalled rank is the first failure: %s", b)
			assert.Contains(t, p.termination(t), "rank 1 on "+p.host+" never joined", "termination message")
		} else {
			other = p
			assert.Equal(t, "unknown", r.Hang.Certainty, "%s", b)
			ranks := []int{}
			for _, s := range r.Hang.Stalled {
				ranks = append(ranks, s.Rank)
				assert.Empty(t, s.Host, "%s", b)
			}
			assert.Contains(t, ranks, stall, "%s", b)
			assert.Contains(t, p.stderr.String(), "on another node", "%s", p)
		}
	}
	require.NotNil(t, held, "no node named rank %d on its own host:\n%s", stall, via)
	require.NotNil(t, other, "%s", via)
	// Every node's output together, as a shared log directory holds it.
	dir := t.TempDir()
	for _, p := range via {
		require.NoError(t, os.WriteFile(filepath.Join(dir, p.host+".log"), []byte(p.stdout.String()+p.stderr.String()), 0o644))
	}
	out, err := exec.Command(ncclrunBin, "explain", "--json", dir).Output()
	require.NoError(t, err, "%s", out)
	r := readHang(t, out)
	require.NotEmpty(t, r.Hang.Stalled, "%s", out)
	assert.Equal(t, stall, r.Hang.Stalled[0].Rank, "%s", out)
	assert.Equal(t, held.host, r.Hang.Stalled[0].Host, "%s", out)
	// And from the nodes' reports.
	out, err = exec.Command(ncclrunBin, "explain", "--json", via[0].report, via[1].report).Output()
	require.NoError(t, err, "%s", out)
	r = readHang(t, out)
	require.NotEmpty(t, r.Hang.Stalled, "%s", out)
	assert.Equal(t, stall, r.Hang.Stalled[0].Rank, "%s", out)
	assert.Equal(t, held.host, r.Hang.Stalled[0].Host, "%s", out)
}
