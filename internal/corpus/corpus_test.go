package corpus

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestScore(t *testing.T) {
	found := map[string][]string{
		"right":      {"memlock", "nccl-error"},
		"second":     {"nccl-error", "memlock"},
		"none":       nil,
		"forbidden":  {"memlock", "shm"},
		"star":       {"nccl-error"},
		"star-clean": nil,
		"skipped":    {"shm"},
	}
	cases := []Case{
		{Case: "right", Expect: []string{"memlock", "memory-registration"}},
		{Case: "second", Expect: []string{"memlock"}},
		{Case: "none", Expect: []string{"shm"}},
		{Case: "forbidden", Expect: []string{"memlock"}, Forbid: []string{"shm"}},
		{Case: "star", Forbid: []string{"*"}},
		{Case: "star-clean", Forbid: []string{"*"}},
		{Case: "skipped", Expect: []string{"memlock"}, Forbid: []string{"shm"}, Skip: true},
	}
	res, err := Score(cases, func(c Case) ([]string, error) { return found[c.Case], nil })
	require.NoError(t, err)
	verdicts := map[string]string{}
	for _, r := range res.Rows {
		verdicts[r.Case] = r.Verdict
	}
	assert.Equal(t, map[string]string{"right": OK, "second": Miss, "none": Miss, "forbidden": Forbid,
		"star": Forbid, "star-clean": Unrated, "skipped": Skipped}, verdicts)
	assert.Equal(t, 2, res.Right, "right and forbidden have the right id first")
	assert.Equal(t, 4, res.Expecting)
	assert.Equal(t, 2, res.ForbiddenCases)
	assert.Equal(t, 1, res.Skipped)
	assert.Equal(t, 50, res.Percent())
	err = res.Err()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "right first in 2/4 cases, below 95%")
	assert.Contains(t, err.Error(), "forbidden id in 2 cases: forbidden, star")
	table := res.Table()
	assert.Contains(t, table, "MISS     second")
	assert.Contains(t, table, "nccl-error (forbidden: nccl-error)")
	assert.Contains(t, table, "right first 2/4 (50%), forbidden id in 2 cases, 1 skipped")
}

func TestThreshold(t *testing.T) {
	mk := func(right, wrong int) []Case {
		var cs []Case
		for i := 0; i < right; i++ {
			cs = append(cs, Case{Case: "r", Expect: []string{"a"}})
		}
		for i := 0; i < wrong; i++ {
			cs = append(cs, Case{Case: "w", Expect: []string{"b"}})
		}
		return cs
	}
	ids := func(Case) ([]string, error) { return []string{"a"}, nil }
	for _, tt := range []struct {
		right, wrong int
		pass         bool
	}{{19, 1, true}, {18, 2, false}, {95, 5, true}, {94, 6, false}, {1, 0, true}, {0, 0, false}} {
		res, err := Score(append(mk(tt.right, tt.wrong), Case{Case: "x", Forbid: []string{"z"}}), ids)
		require.NoError(t, err)
		assert.Equal(t, tt.pass, res.Err() == nil, "%d right, %d wrong: %v", tt.right, tt.wrong, res.Err())
	}
	_, err := Score([]Case{{Case: "e"}}, func(Case) ([]string, error) { return nil, errors.New("boom") })
	assert.ErrorContains(t, err, "e: boom")
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	_, err := Load(dir)
	assert.Error(t, err)
	for _, tt := range []struct{ body, err string }{
		{`[]`, "no cases"},
		{`[{"expect":["a"]}]`, "row 0 has no case name"},
		{`{`, "cases.json"},
	} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "cases.json"), []byte(tt.body), 0o644))
		_, err := Load(dir)
		assert.ErrorContains(t, err, tt.err)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cases.json"), []byte(`[{"case":"a","expect":["x"],"forbid":["*"],"skip":true,"why":"ignored"}]`), 0o644))
	cs, err := Load(dir)
	require.NoError(t, err)
	assert.Equal(t, []Case{{Case: "a", Expect: []string{"x"}, Forbid: []string{"*"}, Skip: true}}, cs)
}
