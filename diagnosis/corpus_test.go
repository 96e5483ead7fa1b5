package diagnosis

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ncclrun/ncclrun/internal/corpus"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from the current output")

type corpusCase struct {
	Case   string   `json:"case"`
	Expect []string `json:"expect"`
	Forbid []string `json:"forbid"`
}

func loadCases(t *testing.T, dir string) []corpusCase {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "cases.json"))
	require.NoError(t, err)
	var cs []corpusCase
	require.NoError(t, json.Unmarshal(b, &cs))
	require.NotEmpty(t, cs)
	return cs
}

func explainFile(t *testing.T, path string) []Diagnosis {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	ds, err := Explain(f, Facts{})
	require.NoError(t, err)
	return ds
}

func checkCorpus(t *testing.T, dir string) {
	for _, c := range loadCases(t, dir) {
		t.Run(c.Case, func(t *testing.T) {
			ds := explainFile(t, filepath.Join(dir, c.Case+".log"))
			if len(c.Expect) > 0 {
				require.NotEmpty(t, ds, "expected one of %v first", c.Expect)
				assert.Contains(t, c.Expect, ds[0].ID, "first diagnosis")
			}
			for _, f := range c.Forbid {
				if f == "*" {
					assert.Empty(t, ds, "no diagnosis expected")
					continue
				}
				for _, d := range ds {
					assert.NotEqual(t, f, d.ID, "forbidden id")
				}
			}
			for _, d := range ds {
				assert.LessOrEqual(t, d.Count, d.Lines)
				assert.IsNonDecreasing(t, d.Hosts)
			}
		})
	}
}

// TestCorpus scores the real-log corpus kept in testdata/corpus (65 logs
// posted publicly, with the causes their threads established) with the
// rule of internal/corpus: it prints one row per case and the score, and
// fails when fewer than 95% of the cases with an expectation have the
// right id first or when a forbidden id appears anywhere. Every
// diagnosis also keeps its counts consistent.
func TestCorpus(t *testing.T) {
	const dir = "testdata/corpus"
	cases, err := corpus.Load(dir)
	require.NoError(t, err)
	res := scoreCases(t, dir, cases)
	t.Logf("real-log corpus:\n%s", res.Table())
	assert.NoError(t, res.Err(), "real-log corpus")
}

// TestGoldenExplainJSON compares explain's JSON for every corpus log with
// testdata/golden/<case>.json; go test -run Golden -update rewrites them.
func TestGoldenExplainJSON(t *testing.T) {
	for _, c := range loadCases(t, "testdata/corpus") {
		t.Run(c.Case, func(t *testing.T) {
			ds := explainFile(t, filepath.Join("testdata/corpus", c.Case+".log"))
			if ds == nil {
				ds = []Diagnosis{}
			}
			got, err := json.MarshalIndent(map[string]any{"diagnoses": ds}, "", "  ")
			require.NoError(t, err)
			got = append(got, '\n')
			path := filepath.Join("testdata/golden", c.Case+".json")
			if *update {
				require.NoError(t, os.MkdirAll("testdata/golden", 0o755))
				require.NoError(t, os.WriteFile(path, got, 0o644))
				return
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "run go test ./diagnosis -run Golden -update")
			if !bytes.Equal(want, got) {
				assert.Equal(t, string(want), string(got))
			}
		})
	}
}
