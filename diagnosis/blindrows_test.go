package diagnosis

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ncclrun/ncclrun/internal/corpus"
)

// blindFloors are what a blind suite written with cases.json rows must
// keep under the shipped catalog: the right cause first in at least
// right of its expecting cases, a forbidden id in at most forbidden logs,
// the first failure right in at least first rows that name one, the
// process count right in at least processes rows that name one. A change
// that lowers a score fails.
type blindFloors struct {
	logs, expecting, right, forbidden, first, processes int
}

// scoreBlindSuite scores the suite in dir with the corpus rule (every
// diagnosis counting at most its lines, its hosts in order) and asserts
// its floors; -v prints one row per case and the score.
func scoreBlindSuite(t *testing.T, name, dir string, fl blindFloors) {
	cases, err := corpus.Load(dir)
	require.NoError(t, err)
	require.Len(t, cases, fl.logs)
	res := scoreCases(t, dir, cases)
	t.Logf("%s:\n%s", name, res.Table())
	assert.Equal(t, fl.expecting, res.Expecting, "expecting cases")
	assert.GreaterOrEqual(t, res.Right, fl.right, "right first")
	assert.LessOrEqual(t, res.ForbiddenCases, fl.forbidden, "logs with a forbidden id")
}

// scoreCases scores the cases of dir with the corpus rule, checking that
// every diagnosis counts at most its lines and lists its hosts in order.
func scoreCases(t *testing.T, dir string, cases []corpus.Case) corpus.Result {
	t.Helper()
	res, err := corpus.Score(cases, func(c corpus.Case) ([]string, error) {
		ds := explainFile(t, filepath.Join(dir, c.Case+".log"))
		for _, d := range ds {
			assert.LessOrEqual(t, d.Count, d.Lines, "%s: %s", c.Case, d.ID)
			assert.IsNonDecreasing(t, d.Hosts, "%s: %s", c.Case, d.ID)
		}
		return ids(ds), nil
	})
	require.NoError(t, err)
	return res
}

// blindRow is what a cases.json row says besides the corpus rule: the
// first failure (a field left out is not judged) and the number of
// processes of the first diagnosis (0: not judged).
type blindRow struct {
	Case  string `json:"case"`
	First *struct {
		Host string `json:"host"`
		Rank *int   `json:"rank"`
	} `json:"first_failure"`
	Processes int `json:"processes"`
}

// judgeBlindRows compares Matcher.FirstFailure with the rows that name
// one (on the logs that got a diagnosis) and the first diagnosis' count
// with the rows that name the processes; -v prints the misses and the
// scores, and it fails below the floors.
func judgeBlindRows(t *testing.T, name, dir string, fl blindFloors) {
	raw, err := os.ReadFile(filepath.Join(dir, "cases.json"))
	require.NoError(t, err)
	var rows []blindRow
	require.NoError(t, json.Unmarshal(raw, &rows))
	right, judged, procRight, procJudged := 0, 0, 0, 0
	rank := func(r *int) string {
		if r == nil {
			return "-"
		}
		return strconv.Itoa(*r)
	}
	for _, r := range rows {
		if r.First == nil && r.Processes == 0 {
			continue
		}
		f, err := os.Open(filepath.Join(dir, r.Case+".log"))
		require.NoError(t, err)
		m := NewMatcher(Facts{})
		require.NoError(t, FeedReader(m, f))
		f.Close()
		if r.Processes > 0 {
			procJudged++
			ds := m.Diagnoses()
			if len(ds) > 0 && ds[0].Count == r.Processes {
				procRight++
			} else if len(ds) > 0 {
				t.Logf("%s: %d processes, want %d", r.Case, ds[0].Count, r.Processes)
			}
		}
		got := m.FirstFailure()
		if r.First == nil || got == nil {
			continue
		}
		judged++
		ok := r.First.Host == "" || r.First.Host == got.Host
		if r.First.Rank != nil {
			ok = ok && got.Rank != nil && *got.Rank == *r.First.Rank
		}
		if ok {
			right++
			continue
		}
		t.Logf("%s: first failure %s rank %s, want %s rank %s", r.Case, got.Host, rank(got.Rank), r.First.Host, rank(r.First.Rank))
	}
	t.Logf("%s first_failure right %d of %d, processes right %d of %d", name, right, judged, procRight, procJudged)
	assert.GreaterOrEqual(t, right, fl.first, "first_failure right")
	assert.GreaterOrEqual(t, procRight, fl.processes, "processes right")
}
