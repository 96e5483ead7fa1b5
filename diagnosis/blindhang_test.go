package diagnosis

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// blindHangCase is one entry of testdata/blindhang/cases.json, written by
// someone who had not read the rule (the directory's README).
type blindHangCase struct {
	Case       string        `json:"case"`
	Stalled    []StalledRank `json:"stalled"`
	PG         string        `json:"pg"`
	Seq        *int64        `json:"seq"`
	OpMismatch bool          `json:"op_mismatch"`
	World      int           `json:"world_size"`
	Why        string        `json:"why"`
}

// blindHangFloor is how many of the blind hang cases explain gets right
// (stalled ranks and hosts, and whether ranks called different
// collectives); it may only rise.
const blindHangFloor = 19

// Promise: on hang logs written blind, explain names the stalled ranks
// with their hosts, says every rank joined where it did, and sees ranks
// that called different collectives, in at least blindHangFloor cases.
func TestBlindHangSuite(t *testing.T) {
	dir := filepath.Join("testdata", "blindhang")
	b, err := os.ReadFile(filepath.Join(dir, "cases.json"))
	require.NoError(t, err)
	var cases []blindHangCase
	require.NoError(t, json.Unmarshal(b, &cases))
	require.NotEmpty(t, cases)
	pass := 0
	for _, c := range cases {
		log, err := os.ReadFile(filepath.Join(dir, c.Case+".log"))
		require.NoError(t, err, c.Case)
		s := NewHangScan("", 0, 0)
		_, _ = s.Write(log)
		s.Flush()
		h := s.Hang()
		ok := h != nil
		var got []StalledRank
		if h != nil {
			got = h.Stalled
			ok = ok && sameStalled(c.Stalled, got) && (len(h.OpMismatch) > 0) == c.OpMismatch
		}
		if ok {
			pass++
		} else {
			t.Logf("%s: want stalled %v mismatch %v, got %v (%s)\n  why: %s", c.Case, c.Stalled, c.OpMismatch, got, HangHeadline(h), c.Why)
		}
	}
	t.Logf("blind hang suite: %d of %d", pass, len(cases))
	assert.GreaterOrEqual(t, pass, blindHangFloor)
}

// sameStalled compares ranks and, where the case names one, hosts
// (case-insensitive, short names).
func sameStalled(want, got []StalledRank) bool {
	if len(want) != len(got) {
		return false
	}
	for i := range want {
		if want[i].Rank != got[i].Rank {
			return false
		}
		if want[i].Host != "" && !sameHost(want[i].Host, got[i].Host) {
			return false
		}
	}
	return true
}
