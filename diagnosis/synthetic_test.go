package diagnosis

import (
	"path/filepath"
	"testing"
)

// TestSyntheticSuite runs the red-team logs of testdata/synthetic: NCCL's
// message formats across versions (docs/research/nccl-messages.md) pasted the
// way users paste them, with expect/forbid rows like the corpus.
func TestSyntheticSuite(t *testing.T) { checkCorpus(t, "testdata/synthetic") }

// TestSyntheticScore logs the suite's score (go test -run SyntheticScore
// -v): logs whose first diagnosis is one of the expected ids, and logs
// where a forbidden id appears; it fails below its floor.
func TestSyntheticScore(t *testing.T) {
	logScore(t, "synthetic", "testdata/synthetic", scoreFloor{right: 82, of: 82})
}

// scoreFloor is the least score a suite may have: right of its first
// diagnoses right out of of (the ratio, and at least right of them), and
// no log with a forbidden id.
type scoreFloor struct{ right, of int }

// logScore logs how a suite in dir scores and fails below floor;
// checkCorpus fails on each log.
func logScore(t *testing.T, name, dir string, floor scoreFloor) {
	right, expecting, forbidHit := 0, 0, 0
	for _, c := range loadCases(t, dir) {
		ds := explainFile(t, filepath.Join(dir, c.Case+".log"))
		if len(c.Expect) > 0 {
			expecting++
			if len(ds) > 0 && contains(c.Expect, ds[0].ID) {
				right++
			} else {
				t.Logf("%s: first %v, want one of %v", c.Case, ids(ds), c.Expect)
			}
		}
		hit := false
		for _, f := range c.Forbid {
			for _, d := range ds {
				if f == "*" || f == d.ID {
					hit = true
				}
			}
		}
		if hit {
			forbidHit++
			t.Logf("%s: forbidden %v among %v", c.Case, c.Forbid, ids(ds))
		}
	}
	t.Logf("%s: first diagnosis right %d/%d, forbidden id present in %d logs", name, right, expecting, forbidHit)
	if right < floor.right || right*floor.of < expecting*floor.right {
		t.Errorf("%s: first diagnosis right %d/%d, below the floor of %d/%d", name, right, expecting, floor.right, floor.of)
	}
	if forbidHit > 0 {
		t.Errorf("%s: a forbidden id in %d logs, the floor is none", name, forbidHit)
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
