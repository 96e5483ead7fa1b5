package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ncclrun/ncclrun/diagnosis"
)

// hangFixture is a file of diagnosis/testdata (hang/ or multinode/).
func hangFixture(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", "diagnosis", "testdata", name))
	require.NoError(t, err)
	require.FileExists(t, p)
	return p
}

// hangOut is what the tests read of --report and explain --json.
type hangOut struct {
	ExitCode     int                 `json:"exit_code"`
	Hang         *diagnosis.Hang     `json:"hang"`
	HangView     *diagnosis.HangView `json:"hang_view"`
	FirstFailure *diagnosis.Failure  `json:"first_failure"`
	Diagnoses    []struct {
		ID string `json:"id"`
	} `json:"diagnoses"`
}

func decodeHang(t *testing.T, b []byte) hangOut {
	t.Helper()
	var h hangOut
	require.NoError(t, json.Unmarshal(b, &h), "%s", b)
	return h
}

// runHangNode runs CMD that prints log and exits 1, with the job's size
// as a torchrun command line gives it (the words after the script are
// sh's $0 and arguments, which WorldFromCommand reads as they stand),
// and returns run's result, its report and its termination message.
func runHangNode(t *testing.T, log string, launcher ...string) (result, hangOut, string) {
	t.Helper()
	dir := t.TempDir()
	rep, tl := filepath.Join(dir, "report.json"), filepath.Join(dir, "termination-log")
	args := append([]string{"--report", rep, "--termination-log", tl, "--", "sh", "-c", `cat "$HANG_LOG"; exit 1`}, launcher...)
	r := invocation{args: args, env: []string{"HANG_LOG=" + log}}.run(t)
	b, err := os.ReadFile(rep)
	require.NoError(t, err)
	return r, decodeHang(t, b), mustRead(t, tl)
}

// Promise: run names the stalled rank of a hung collective first, in
// its text, its report (hang, hang_view, first_failure) and its
// termination message; the hang is a failure, so run exits as CMD did,
// and CMD's output is relayed unchanged.
func TestRunNamesStalledRank(t *testing.T) {
	log := hangFixture(t, "hang/v2.4-dump.log")
	r, rep, msg := runHangNode(t, log)
	require.Equal(t, 1, r.code, "stderr: %s", r.stderr)
	want, err := os.ReadFile(log)
	require.NoError(t, err)
	assert.Equal(t, string(want), r.stdout, "CMD's output is relayed as it is")
	require.NotNil(t, rep.Hang)
	assert.Equal(t, []diagnosis.StalledRank{{Rank: 3}}, rep.Hang.Stalled)
	assert.Equal(t, diagnosis.HangCertain, rep.Hang.Certainty)
	assert.NotEmpty(t, rep.Hang.LastLines["3"])
	require.NotNil(t, rep.HangView)
	require.NotNil(t, rep.FirstFailure)
	require.NotNil(t, rep.FirstFailure.Rank)
	assert.Equal(t, 3, *rep.FirstFailure.Rank)
	hang := strings.Index(r.stderr, "ncclrun: hang: rank 3 never joined ALLREDUCE #12")
	require.GreaterOrEqual(t, hang, 0, "stderr: %s", r.stderr)
	assert.Less(t, hang, strings.Index(r.stderr, "ncclrun: summary:"), "the hang comes first")
	assert.True(t, strings.HasPrefix(msg, "ncclrun: hang: rank 3 never joined"), "termination message: %s", msg)
	assert.Contains(t, msg, diagnosis.HangViewTag)
	assert.LessOrEqual(t, len(msg), terminationLimit)
}

// Promise: a run whose CMD prints no timeout has no hang in its report.
func TestRunNoHangWithoutTimeout(t *testing.T) {
	dir := t.TempDir()
	rep := filepath.Join(dir, "r.json")
	r := ncclrun(t, "--report", rep, "--", "sh", "-c", "echo '[rank0]:step 1'; exit 2")
	require.Equal(t, 2, r.code)
	b, err := os.ReadFile(rep)
	require.NoError(t, err)
	assert.NotContains(t, string(b), `"hang"`)
	assert.NotContains(t, string(b), `"hang_view"`)
}

// Promise: explain given every node's --report, or the JSON of the
// Job's pods (their termination messages), names the job's stalled rank
// and its host, which no single node's report could; the same from the
// nodes' logs in a directory.
func TestExplainMergesNodes(t *testing.T) {
	torchrun := []string{"torchrun", "--nnodes", "2", "--nproc_per_node", "2", "mn.py"}
	dir := t.TempDir()
	var reports []string
	pods := `{"apiVersion":"v1","kind":"List","items":[`
	for i, node := range []string{"node0", "node1"} {
		log := hangFixture(t, "multinode/torchrun-hang."+node+".log")
		_, rep, msg := runHangNode(t, log, torchrun...)
		require.NotNil(t, rep.Hang, node)
		b, err := json.Marshal(rep)
		require.NoError(t, err)
		p := filepath.Join(dir, node+".json")
		require.NoError(t, os.WriteFile(p, b, 0o644))
		reports = append(reports, p)
		m, err := json.Marshal(msg)
		require.NoError(t, err)
		if i > 0 {
			pods += ","
		}
		pods += `{"metadata":{"name":"trainer-` + node + `"},"status":{"containerStatuses":[{"state":{"terminated":{"exitCode":1,"message":` + string(m) + `}}}]}}`
	}
	pods += "]}"
	podsFile := filepath.Join(dir, "pods.json")
	require.NoError(t, os.WriteFile(podsFile, []byte(pods), 0o644))
	logs := filepath.Join(dir, "logs")
	require.NoError(t, os.Mkdir(logs, 0o755))
	for _, node := range []string{"node0", "node1"} {
		b, err := os.ReadFile(hangFixture(t, "multinode/torchrun-hang."+node+".log"))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(logs, node+".log"), b, 0o644))
	}
	for name, args := range map[string][]string{
		"reports":       reports,
		"pods":          {podsFile},
		"log directory": {logs},
	} {
		t.Run(name, func(t *testing.T) {
			r := ncclrun(t, append([]string{"explain", "--json"}, args...)...)
			require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
			out := decodeHang(t, []byte(r.stdout))
			require.NotNil(t, out.Hang, "%s", r.stdout)
			assert.Equal(t, []diagnosis.StalledRank{{Rank: 1, Host: "node0"}}, out.Hang.Stalled, "%s", r.stdout)
			assert.Equal(t, []int{0, 2, 3}, out.Hang.Waited)
			require.NotNil(t, out.FirstFailure)
			assert.Equal(t, "node0", out.FirstFailure.Host)
			text := ncclrun(t, append([]string{"explain"}, args...)...)
			assert.True(t, strings.HasPrefix(text.stdout, "hang: rank 1 on node0 never joined"), "%s", text.stdout)
		})
	}
}

// Promise: a JSON input that is neither a report nor a pod list is a
// usage error naming it.
func TestExplainRefusesOtherJSON(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.json")
	require.NoError(t, os.WriteFile(p, []byte(`{"diagnoses": 3}`), 0o644))
	requireUsage(t, ncclrun(t, "explain", p), "x.json")
	require.NoError(t, os.WriteFile(p, []byte(`{"items_of_mine": []}`), 0o644))
	requireUsage(t, ncclrun(t, "explain", p), "neither a --report nor a pod list")
}

// Promise: a hang among very many ranks is judged in bounded memory and
// time: each of 50000 ranks prints lines and a 2.6 PG-status line but
// one, which prints the dump signal that shows it never enqueued the
// collective (named, certain), or nothing at all (no rank is named: past
// the records kept, silence is not judged); explain stays within the 16
// MiB it keeps for any log, its output bounded.
func TestExplainHangBounded(t *testing.T) {
	const ranks, stalled = 50_000, 31_337
	for _, signal := range []bool{true, false} {
		var b bytes.Buffer
		for r := 0; r < ranks; r++ {
			fmt.Fprintf(&b, "[rank%d]:step 100 loss %d %s\n", r, r, strings.Repeat("x", 300))
			if r != stalled {
				fmt.Fprintf(&b, "[rank%d]:[E1102 03:12:44.118399120 ProcessGroupNCCL.cpp:2271] [PG ID 0 PG GUID 0(default_pg) Rank %d]  failure detected by watchdog at work sequence id: 78 PG status: last enqueued work: 79, last completed work: 77\n", r, r)
			} else if signal {
				fmt.Fprintf(&b, "[rank%d]:[E1102 03:12:45.003100222 ProcessGroupNCCL.cpp:1826] [PG ID 0 PG GUID 0(default_pg) Rank %d] Received a dump signal due to a collective timeout from  rank 0 and we will try our best to dump the debug info. Last enqueued NCCL work: 77, last completed NCCL work: 77.\n", r, r)
			}
		}
		p := filepath.Join(t.TempDir(), "many-ranks.log")
		require.NoError(t, os.WriteFile(p, b.Bytes(), 0o644))
		r := runMeasured(t, "explain", "--json", p)
		require.Equal(t, 0, r.code, r.stderr)
		out := decodeHang(t, []byte(r.stdout))
		require.NotNil(t, out.Hang)
		if signal {
			assert.Equal(t, []diagnosis.StalledRank{{Rank: stalled}}, out.Hang.Stalled)
			assert.Equal(t, diagnosis.HangCertain, out.Hang.Certainty)
		} else {
			assert.Empty(t, out.Hang.Stalled, "no rank is named from silence past the bound")
		}
		assert.LessOrEqual(t, len(r.stdout), 64<<10)
		assertRSSBounded(t, r)
	}
}
