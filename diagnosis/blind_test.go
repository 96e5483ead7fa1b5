package diagnosis

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// blindDir holds the blind suite: logs written from NCCL's message formats
// (docs/research/nccl-messages.md) and the way users paste them, by someone who
// had not read catalog.json or the synthetic logs.
const blindDir = "testdata/blind"

// TestBlindSuite runs the blind logs with the corpus rules: the first
// diagnosis is one of expect, no forbidden id appears, ["*"] means none.
func TestBlindSuite(t *testing.T) { checkCorpus(t, blindDir) }

// TestBlindScore logs the blind suite's score (go test -run BlindScore -v)
// and fails below its floor.
func TestBlindScore(t *testing.T) { logScore(t, "blind", blindDir, scoreFloor{right: 67, of: 67}) }

// blindCase is a row of testdata/blind/cases.json.
type blindCase struct {
	Case     string   `json:"case"`
	Category string   `json:"category"`
	Expect   []string `json:"expect"`
	Forbid   []string `json:"forbid"`
	Why      string   `json:"why"`
	// Note is blind3's name for Why.
	Note string `json:"note"`
}

// TestBlindSuiteShape keeps the suite honest: every category of the
// judged set is covered, at least ten logs are healthy or unrelated
// (forbid ["*"]), every row has a log and a reason, every log has a row,
// and every id named exists in the catalog.
func TestBlindSuiteShape(t *testing.T) {
	cs, negatives := checkSuiteRows(t, blindDir)
	perCat := map[string]int{}
	for _, c := range cs {
		perCat[c.Category]++
	}
	for _, cat := range []string{"shm", "memlock", "other", "gdr_peermem", "no_ib_device", "socket_ifname",
		"duplicate_gpu", "watchdog_timeout", "cuda_oom", "ibverbs_missing", "ib_link_or_timeout", "none"} {
		assert.GreaterOrEqual(t, perCat[cat], 3, "category %q", cat)
	}
	assert.GreaterOrEqual(t, negatives, 10, "healthy/unrelated logs")
}

// checkSuiteRows checks what every hand-written suite under dir owes its
// cases.json: each row once, with a reason and a log; forbid ["*"] without
// an expectation; every id named a catalog id; every log with a row. It
// returns the rows and how many are healthy or unrelated (forbid ["*"]).
func checkSuiteRows(t *testing.T, dir string) (cs []blindCase, negatives int) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "cases.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &cs))

	rows := map[string]bool{}
	for _, c := range cs {
		assert.False(t, rows[c.Case], "case %q twice", c.Case)
		rows[c.Case] = true
		assert.NotEmpty(t, c.Why+c.Note, "%s: why (or note)", c.Case)
		assert.FileExists(t, filepath.Join(dir, c.Case+".log"))
		if len(c.Forbid) == 1 && c.Forbid[0] == "*" {
			negatives++
			assert.Empty(t, c.Expect, "%s: forbid * with an expectation", c.Case)
		}
		for _, id := range append(append([]string{}, c.Expect...), c.Forbid...) {
			if id == "*" {
				continue
			}
			_, ok := DefaultCatalog().Entry(id)
			assert.True(t, ok, "%s: %q is not a catalog id", c.Case, id)
		}
	}
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	require.NoError(t, err)
	for _, p := range logs {
		assert.True(t, rows[strings.TrimSuffix(filepath.Base(p), ".log")], "%s has no row in cases.json", p)
	}
	return cs, negatives
}

// TestBlindMemlockFacts: where a log alone cannot tell memlock from a
// driver/kernel registration failure (expect holds both), run's facts
// decide: an adequate allowance gives memory-registration first, a low one
// memlock, certain.
func TestBlindMemlockFacts(t *testing.T) {
	n := 0
	for _, c := range loadCases(t, blindDir) {
		if !contains(c.Expect, "memlock") || !contains(c.Expect, "memory-registration") {
			continue
		}
		n++
		t.Run(c.Case, func(t *testing.T) {
			path := filepath.Join(blindDir, c.Case+".log")
			for _, tc := range []struct {
				facts Facts
				want  string
			}{
				{Facts{Known: true, MemlockAdequate: true, Seen: "RLIMIT_MEMLOCK unlimited"}, "memory-registration"},
				{Facts{Known: true, Seen: "RLIMIT_MEMLOCK 8 MiB, CAP_IPC_LOCK not effective"}, "memlock"},
			} {
				f, err := os.Open(path)
				require.NoError(t, err)
				ds, err := Explain(f, tc.facts)
				f.Close()
				require.NoError(t, err)
				require.NotEmpty(t, ds)
				assert.Equal(t, tc.want, ds[0].ID)
				assert.Equal(t, Certain, ds[0].Certainty)
			}
		})
	}
	require.NotZero(t, n, "no ambiguous memlock case in the blind suite")
}
