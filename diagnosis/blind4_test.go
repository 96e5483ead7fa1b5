package diagnosis

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ncclrun/ncclrun/internal/corpus"
)

// blind4Dir holds the fourth blind suite: 57 multi-rank logs whose wording
// was taken from the programs that print it (NCCL by tag, PyTorch's c10d,
// Gloo, UCX, rdma-core, perftest, Open MPI, the CUDA runtime), written
// without the rules; 16 of them are healthy or fail outside NCCL
// (testdata/blind4/README.md).
const blind4Dir = "testdata/blind4"

// Floors of the fourth blind suite under the shipped catalog (see
// docs/diagnosis.md): the right cause first in at least blind4MinRight
// expecting cases, a forbidden id in at most blind4MaxForbidden logs. A
// change that lowers the score fails here.
const (
	blind4MinRight     = 37
	blind4MaxForbidden = 6
)

// TestBlind4Score scores the fourth blind suite with the corpus rule and
// asserts its floors; -v prints one row per case and the score.
func TestBlind4Score(t *testing.T) {
	cases, err := corpus.Load(blind4Dir)
	require.NoError(t, err)
	require.Len(t, cases, 57)
	res, err := corpus.Score(cases, func(c corpus.Case) ([]string, error) {
		ds := explainFile(t, filepath.Join(blind4Dir, c.Case+".log"))
		for _, d := range ds {
			assert.LessOrEqual(t, d.Count, d.Lines, "%s: %s", c.Case, d.ID)
			assert.IsNonDecreasing(t, d.Hosts, "%s: %s", c.Case, d.ID)
		}
		return ids(ds), nil
	})
	require.NoError(t, err)
	t.Logf("blind4:\n%s", res.Table())
	assert.Equal(t, 41, res.Expecting, "expecting cases")
	assert.GreaterOrEqual(t, res.Right, blind4MinRight, "right first")
	assert.LessOrEqual(t, res.ForbiddenCases, blind4MaxForbidden, "logs with a forbidden id")
}
