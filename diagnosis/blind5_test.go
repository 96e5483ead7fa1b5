package diagnosis

import (
	"testing"
)

// blind5Dir holds the fifth blind suite: 40 logs of the failure families
// unseen logs still missed (NVLS setup CUDA failures, a missing
// libibverbs where IB is not wanted, torch 1.13's c10d bind failure,
// NCCL's socket transport on bridges and veths, an attach to a nameless
// /dev/shm segment, a lost Gloo peer before torchrun's own timeouts,
// completion errors naming a peer's address, the first rank from NCCL's
// comm lines, torchrun's @record reprints) and healthy runs of each kind,
// written without the rules (testdata/blind5/README.md).
const blind5Dir = "testdata/blind5"

// blind5Floors are the fifth blind suite's floors under the shipped
// catalog (docs/diagnosis.md).
var blind5Floors = blindFloors{logs: 40, expecting: 29, right: 29, forbidden: 0, first: 11, processes: 3}

// TestBlind5Score scores the fifth blind suite with the corpus rule
// and asserts its floors.
func TestBlind5Score(t *testing.T) { scoreBlindSuite(t, "blind5", blind5Dir, blind5Floors) }

// TestBlind5FirstFailure judges the fifth blind suite's first
// failures and process counts against its rows.
func TestBlind5FirstFailure(t *testing.T) { judgeBlindRows(t, "blind5", blind5Dir, blind5Floors) }
