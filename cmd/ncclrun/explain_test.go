package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ncclrun/ncclrun/internal/corpus"
)

// corpusDir is the real-log corpus in diagnosis/testdata/corpus.
func corpusDir(t *testing.T) string {
	t.Helper()
	d := filepath.Join("..", "..", "diagnosis", "testdata", "corpus")
	require.FileExists(t, filepath.Join(d, "cases.json"))
	return d
}

func explainIDs(t *testing.T, stdout string) []string {
	t.Helper()
	var out struct {
		Diagnoses []struct {
			ID string `json:"id"`
		} `json:"diagnoses"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &out), stdout)
	ids := []string{}
	for _, d := range out.Diagnoses {
		ids = append(ids, d.ID)
	}
	return ids
}

// TestExplainCorpus scores `explain --json` over the real-log corpus with
// the rule diagnosis's TestCorpus applies (internal/corpus): at least 95%
// of the expecting cases right first, no forbidden id anywhere, and
// explain exits 0 on every log.
func TestExplainCorpus(t *testing.T) {
	dir := corpusDir(t)
	cases, err := corpus.Load(dir)
	require.NoError(t, err)
	res, err := corpus.Score(cases, func(c corpus.Case) ([]string, error) {
		r := ncclrun(t, "explain", "--json", filepath.Join(dir, c.Case+".log"))
		if r.code != 0 {
			return nil, fmt.Errorf("explain exited %d, stderr %q", r.code, r.stderr)
		}
		return explainIDs(t, r.stdout), nil
	})
	require.NoError(t, err)
	t.Logf("explain over the real-log corpus:\n%s", res.Table())
	require.NoError(t, res.Err())
}

// TestExplainCompressedEqualsPlain: a gzip copy (with a misleading name)
// explains exactly as the plain log, from a file and stdin.
func TestExplainCompressedEqualsPlain(t *testing.T) {
	dir := corpusDir(t)
	plainPath := filepath.Join(dir, "memlock-32.log")
	plain := []byte(mustRead(t, plainPath))
	want := ncclrun(t, "explain", "--json", plainPath)
	require.Equal(t, 0, want.code)

	tmp := t.TempDir()
	copies := map[string][]byte{
		"gz.txt":   gzipBytes(t, plain),
		"plain.gz": plain,
	}
	for name, data := range copies {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(tmp, name)
			require.NoError(t, os.WriteFile(p, data, 0o644))
			r := ncclrun(t, "explain", "--json", p)
			require.Equal(t, 0, r.code, "stderr: %q", r.stderr)
			require.JSONEq(t, want.stdout, r.stdout)
			r = invocation{args: []string{"explain", "--json", "-"}, stdin: string(data)}.run(t)
			require.Equal(t, 0, r.code, "stderr: %q", r.stderr)
			require.JSONEq(t, want.stdout, r.stdout)
		})
	}
}

func TestExplainSeveralFilesAreOneLogSet(t *testing.T) {
	dir := corpusDir(t)
	a, b := filepath.Join(dir, "memlock-32.log"), filepath.Join(dir, "shm-02.log")
	ra := explainIDs(t, ncclrun(t, "explain", "--json", a).stdout)
	rb := explainIDs(t, ncclrun(t, "explain", "--json", b).stdout)
	both := ncclrun(t, "explain", "--json", a, b)
	require.Equal(t, 0, both.code)
	got := explainIDs(t, both.stdout)
	want := append(append([]string{}, ra...), rb...)
	sort.Strings(got)
	sort.Strings(want)
	require.Equal(t, dedup(want), got, "one diagnosis per cause across files")
	require.NotEmpty(t, got)

	// The same file twice: counts and hosts stay one set, ids do not repeat.
	twice := explainIDs(t, ncclrun(t, "explain", "--json", a, a).stdout)
	require.ElementsMatch(t, ra, twice)
}

func dedup(xs []string) []string {
	var out []string
	for i, x := range xs {
		if i == 0 || xs[i-1] != x {
			out = append(out, x)
		}
	}
	return out
}

func TestExplainHumanOutput(t *testing.T) {
	r := invocation{args: []string{"explain"}, stdin: "all good\nrank 0 finished\n"}.run(t)
	require.Equal(t, 0, r.code)
	require.Equal(t, "no NCCL failure found\n", r.stdout)

	dir := corpusDir(t)
	r = ncclrun(t, "explain", filepath.Join(dir, "memlock-32.log"))
	require.Equal(t, 0, r.code)
	for _, k := range []string{"memlock: ", "  seen:  ", "  first: ", "  cause: ", "  fix:   "} {
		require.Contains(t, r.stdout, k)
	}
}

func TestExplainUnreadableInput(t *testing.T) {
	tmp := t.TempDir()
	corrupt := filepath.Join(tmp, "corrupt.gz")
	gz := gzipBytes(t, bytes.Repeat([]byte("NCCL WARN something\n"), 1000))
	require.NoError(t, os.WriteFile(corrupt, gz[:len(gz)/2], 0o644))
	requireUsage(t, ncclrun(t, "explain", corrupt), "corrupt.gz")
	requireUsage(t, ncclrun(t, "explain", tmp), tmp)
	requireUsage(t, ncclrun(t, "explain", "-", "-"), "stdin")
}

func gzipBytes(t *testing.T, b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	_, err := w.Write(b)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	return buf.Bytes()
}
