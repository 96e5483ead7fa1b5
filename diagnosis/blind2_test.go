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

// blind2Dir holds the second blind suite (issue 4): long multi-host logs
// where the root cause is on one host, late or in the middle, among
// knock-on errors from every other rank; torchrun summaries only; logs
// that are 95% NCCL INFO with one WARN; healthy long runs; a memlock
// failure followed by IB errors elsewhere. Written from NCCL's formats
// (research/nccl-messages.md) without reading catalog.json or the other
// suites' logs.
const blind2Dir = "testdata/blind2"

// TestBlind2Suite runs the second blind suite with the corpus rules.
func TestBlind2Suite(t *testing.T) { checkCorpus(t, blind2Dir) }

// TestBlind2Score logs its score (go test -run BlindScore -v).
func TestBlind2Score(t *testing.T) { logScore(t, "blind2", blind2Dir) }

// TestBlind2SuiteShape: every row has a log and a reason, every log a
// row, every id named is a catalog id, the multi-host logs are long
// (hundreds of lines) and at least four logs are healthy or unrelated.
func TestBlind2SuiteShape(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(blind2Dir, "cases.json"))
	require.NoError(t, err)
	var cs []blindCase
	require.NoError(t, json.Unmarshal(b, &cs))
	require.GreaterOrEqual(t, len(cs), 30)

	rows := map[string]bool{}
	negatives := 0
	for _, c := range cs {
		assert.False(t, rows[c.Case], "case %q twice", c.Case)
		rows[c.Case] = true
		assert.NotEmpty(t, c.Why, "%s: why", c.Case)
		data, err := os.ReadFile(filepath.Join(blind2Dir, c.Case+".log"))
		if !assert.NoError(t, err) {
			continue
		}
		if strings.HasPrefix(c.Case, "mh") {
			assert.GreaterOrEqual(t, strings.Count(string(data), "\n"), 150, "%s: a multi-host log should be long", c.Case)
		}
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
	assert.GreaterOrEqual(t, negatives, 4, "healthy logs")

	logs, err := filepath.Glob(filepath.Join(blind2Dir, "*.log"))
	require.NoError(t, err)
	for _, p := range logs {
		assert.True(t, rows[strings.TrimSuffix(filepath.Base(p), ".log")], "%s has no row in cases.json", p)
	}
}
