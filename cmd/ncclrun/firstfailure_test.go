package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ncclrun/ncclrun/preflight"
)

// exceptionThenLostPeer is a 2-rank torchrun job whose rank 0 raised a
// program error, after which rank 1 lost its peer (Gloo).
const exceptionThenLostPeer = `[rank0]: Traceback (most recent call last):
[rank0]:   File "/job/train.py", line 9, in main
[rank0]: KeyError: 'input_ids'
[rank1]: Traceback (most recent call last):
[rank1]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer [127.0.0.1]:29500
`

// Promise (docs/contract.md): explain leads with the first failure in
// the order the lines came, and marks what followed from it.
func TestExplainFirstFailure(t *testing.T) {
	log := filepath.Join(t.TempDir(), "job.log")
	require.NoError(t, os.WriteFile(log, []byte(exceptionThenLostPeer), 0o644))

	r := ncclrun(t, "explain", "--json", log)
	require.Equal(t, 0, r.code, r.stderr)
	var out struct {
		FirstFailure struct {
			ID   string `json:"id"`
			Rank *int   `json:"rank"`
			Line string `json:"line"`
		} `json:"first_failure"`
		Diagnoses []struct {
			ID        string   `json:"id"`
			KnockOnOf string   `json:"knock_on_of"`
			Peers     []string `json:"peers"`
		} `json:"diagnoses"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &out), r.stdout)
	assert.Empty(t, out.FirstFailure.ID)
	assert.Equal(t, "KeyError: 'input_ids'", out.FirstFailure.Line)
	require.NotNil(t, out.FirstFailure.Rank)
	assert.Equal(t, 0, *out.FirstFailure.Rank)
	require.Len(t, out.Diagnoses, 1)
	assert.Equal(t, "peer-lost", out.Diagnoses[0].ID)
	assert.Equal(t, "exception", out.Diagnoses[0].KnockOnOf)
	assert.Equal(t, []string{"127.0.0.1"}, out.Diagnoses[0].Peers)

	r = ncclrun(t, "explain", log)
	require.Equal(t, 0, r.code, r.stderr)
	assert.True(t, strings.HasPrefix(r.stdout, "first failure: KeyError: 'input_ids' (rank 0)\n"), r.stdout)
	assert.Contains(t, r.stdout, "peer-lost: ")
	assert.Contains(t, r.stdout, "knock-on of the first failure")
}

// Promise: run's report and termination message name the exception as
// the first failure, not the sibling's lost connection.
func TestRunFirstFailureReport(t *testing.T) {
	r, report, termLog := runPrinting(t, exceptionThenLostPeer)
	assert.Contains(t, r.stderr, "ncclrun:   first failure: KeyError: 'input_ids' (rank 0)\n")

	msg, err := os.ReadFile(termLog)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(msg), "ncclrun: first failure: KeyError: 'input_ids' (rank 0)\n"), string(msg))
	assert.Contains(t, string(msg), "(peer-lost")

	data, err := os.ReadFile(report)
	require.NoError(t, err)
	var rr struct {
		FirstFailure struct {
			Line string `json:"line"`
		} `json:"first_failure"`
		Diagnoses []struct {
			ID        string `json:"id"`
			KnockOnOf string `json:"knock_on_of"`
		} `json:"diagnoses"`
	}
	require.NoError(t, json.Unmarshal(data, &rr))
	assert.Equal(t, "KeyError: 'input_ids'", rr.FirstFailure.Line)
	require.Len(t, rr.Diagnoses, 1)
	assert.Equal(t, "exception", rr.Diagnoses[0].KnockOnOf)
}

// Preflight's facts are this host's: the matcher is told which host that
// is, so that another host's lines are judged without them.
func TestFactsNameThisHost(t *testing.T) {
	h, err := os.Hostname()
	require.NoError(t, err)
	assert.Equal(t, h, facts(preflight.Report{}, 0).Host)
}

// Promise (docs/diagnosis.md "Facts are this host's"): a remote rank's
// registration ENOMEM under mpirun is judged without this host's limits:
// memlock, likely, naming that host; never "the limit is not the cause"
// because this host's own limit was adequate.
func TestRunRemoteHostNotJudgedByLocalFacts(t *testing.T) {
	dir := t.TempDir()
	report := filepath.Join(dir, "report.json")
	const line = "ncclrun-remote-node:4242:4250 [0] misc/ibvwrap.cc:190 NCCL WARN Call to ibv_reg_mr failed with error Cannot allocate memory"
	r := ncclrun(t, "--report", report, "--", "sh", "-c", "echo '"+line+"'; exit 1")
	require.Equal(t, 1, r.code, r.stderr)
	data, err := os.ReadFile(report)
	require.NoError(t, err)
	var rr struct {
		Diagnoses []struct {
			ID        string   `json:"id"`
			Certainty string   `json:"certainty"`
			Cause     string   `json:"cause"`
			Hosts     []string `json:"hosts"`
		} `json:"diagnoses"`
	}
	require.NoError(t, json.Unmarshal(data, &rr))
	require.Len(t, rr.Diagnoses, 1, string(data))
	d := rr.Diagnoses[0]
	assert.Equal(t, "memlock", d.ID)
	assert.Equal(t, "likely", d.Certainty)
	assert.Equal(t, []string{"ncclrun-remote-node"}, d.Hosts)
	assert.Contains(t, d.Cause, "Seen on ncclrun-remote-node")
	assert.NotContains(t, d.Cause, "this host")
}

// runPrinting runs ncclrun with --report and --termination-log in front
// of a CMD that prints out to stderr and exits 1, which it requires; it
// returns the result and the paths of the report and the termination
// message.
func runPrinting(t *testing.T, out string) (r result, report, termLog string) {
	t.Helper()
	dir := t.TempDir()
	log := filepath.Join(dir, "job.log")
	require.NoError(t, os.WriteFile(log, []byte(out), 0o644))
	report, termLog = filepath.Join(dir, "report.json"), filepath.Join(dir, "termination-log")
	r = ncclrun(t, "--report", report, "--termination-log", termLog, "--", "sh", "-c", "cat "+log+" >&2; exit 1")
	require.Equal(t, 1, r.code, r.stderr)
	return r, report, termLog
}
