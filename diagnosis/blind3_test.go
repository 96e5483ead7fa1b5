package diagnosis

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ncclrun/ncclrun/internal/corpus"
)

// blind3Dir holds the third blind suite: long multi-rank logs
// (8 to 64 ranks on several hosts, torchrun/mpirun/kubectl/srun/pdsh
// prefixes, INFO noise, the root cause on one host among knock-ons,
// healthy runs with alarming-looking lines), written from the message
// formats without reading the rules, the other suites or the corpus
// (testdata/blind3/README.md).
const blind3Dir = "testdata/blind3"

// TestBlind3Suite scores the third blind suite with the corpus rule
// (internal/corpus: 95% of the expecting cases right first, no forbidden
// id anywhere); -v prints one row per case and the score.
func TestBlind3Suite(t *testing.T) {
	cases, err := corpus.Load(blind3Dir)
	require.NoError(t, err)
	res := scoreCases(t, blind3Dir, cases)
	t.Logf("blind3:\n%s", res.Table())
	assert.NoError(t, res.Err(), "blind3")
}

// TestBlind3SuiteShape: every row has a log and a reason (its note),
// every log a row, every id named is a catalog id; the logs are long and
// multi-rank, and some are healthy or unrelated.
func TestBlind3SuiteShape(t *testing.T) {
	cs, negatives := checkSuiteRows(t, blind3Dir)
	require.GreaterOrEqual(t, len(cs), 30)
	long := 0
	for _, c := range cs {
		data, err := os.ReadFile(filepath.Join(blind3Dir, c.Case+".log"))
		require.NoError(t, err)
		if strings.Count(string(data), "\n") >= 100 {
			long++
		}
	}
	assert.GreaterOrEqual(t, long*10, len(cs)*9, "at least 90%% of the logs are long (100 lines or more)")
	assert.GreaterOrEqual(t, negatives, 4, "healthy or unrelated logs")
}
