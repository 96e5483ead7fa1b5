package diagnosis

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestOwnLinesAreNoEvidence: the lines an inner ncclrun writes (its
// preflight, its diagnoses quoting NCCL's WARN), bare or behind a
// launcher's tag, a pod prefix or a timestamp, name no cause; the NCCL
// line they quote does, and so does an NCCL line that mentions ncclrun.
func TestOwnLinesAreNoEvidence(t *testing.T) {
	warn := "gpu-node-01:31010:31107 [2] transport/net_ib.cc:1295 NCCL WARN Call to ibv_reg_mr failed with error Cannot allocate memory"
	for _, tc := range []struct {
		name string
		line string
		want []string
	}{
		{"preflight", "ncclrun: memlock: RLIMIT_MEMLOCK is 64 KiB (soft=hard) and root has no CAP_IPC_LOCK: NCCL cannot register memory (ibv_reg_mr fails with Cannot allocate memory)", nil},
		{"first failure", "ncclrun:   first failure: memlock: " + warn, nil},
		{"rank tag", "[1,0]<stderr>:ncclrun:   first failure: memlock: " + warn, nil},
		{"pod and time", "[pod/train-0/trainer] 2026-12-03T09:00:00Z ncclrun: Memory registration failed: locked-memory limit too low: ibv_reg_mr failed with Cannot allocate memory", nil},
		{"the NCCL line", warn, []string{"memlock"}},
		{"NCCL line naming ncclrun", strings.Replace(warn, "Cannot allocate memory", "Cannot allocate memory (see ncclrun: doctor)", 1), []string{"memlock"}},
		{"another word", "myncclrun: " + warn, []string{"memlock"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMatcher(Facts{})
			m.Feed([]byte(tc.line))
			var got []string
			for _, d := range m.Diagnoses() {
				got = append(got, d.ID)
			}
			assert.Equal(t, tc.want, got)
		})
	}
}
