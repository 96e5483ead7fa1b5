package diagnosis

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// blind2Dir holds the second blind suite: long multi-host logs
// where the root cause is on one host, late or in the middle, among
// knock-on errors from every other rank; torchrun summaries only; logs
// that are 95% NCCL INFO with one WARN; healthy long runs; a memlock
// failure followed by IB errors elsewhere. Written from NCCL's formats
// (docs/research/nccl-messages.md) without reading catalog.json or the other
// suites' logs.
const blind2Dir = "testdata/blind2"

// TestBlind2Suite runs the second blind suite with the corpus rules.
func TestBlind2Suite(t *testing.T) { checkCorpus(t, blind2Dir) }

// TestBlind2Score logs its score (go test -run Blind2Score -v) and fails
// below its floor.
func TestBlind2Score(t *testing.T) { logScore(t, "blind2", blind2Dir, scoreFloor{right: 25, of: 25}) }

// TestBlind2SuiteShape: every row has a log and a reason, every log a
// row, every id named is a catalog id, the multi-host logs are long
// (hundreds of lines) and at least four logs are healthy or unrelated.
func TestBlind2SuiteShape(t *testing.T) {
	cs, negatives := checkSuiteRows(t, blind2Dir)
	require.GreaterOrEqual(t, len(cs), 30)
	for _, c := range cs {
		if !strings.HasPrefix(c.Case, "mh") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(blind2Dir, c.Case+".log"))
		if assert.NoError(t, err) {
			assert.GreaterOrEqual(t, strings.Count(string(data), "\n"), 150, "%s: a multi-host log should be long", c.Case)
		}
	}
	assert.GreaterOrEqual(t, negatives, 4, "healthy logs")
}
