package diagnosis

import (
	"testing"
)

// blind4Dir holds the fourth blind suite: 57 multi-rank logs whose wording
// was taken from the programs that print it (NCCL by tag, PyTorch's c10d,
// Gloo, UCX, rdma-core, perftest, Open MPI, the CUDA runtime), written
// without the rules; 16 of them are healthy or fail outside NCCL
// (testdata/blind4/README.md).
const blind4Dir = "testdata/blind4"

// blind4Floors are the fourth blind suite's floors under the shipped
// catalog (docs/diagnosis.md).
var blind4Floors = blindFloors{logs: 57, expecting: 41, right: 41, forbidden: 0, first: 14, processes: 0}

// TestBlind4Score scores the fourth blind suite with the corpus rule
// and asserts its floors.
func TestBlind4Score(t *testing.T) { scoreBlindSuite(t, "blind4", blind4Dir, blind4Floors) }

// TestBlind4FirstFailure judges the fourth blind suite's first
// failures and process counts against its rows.
func TestBlind4FirstFailure(t *testing.T) { judgeBlindRows(t, "blind4", blind4Dir, blind4Floors) }
