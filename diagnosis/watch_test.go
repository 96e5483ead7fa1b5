package diagnosis

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWatchFeed: a chunk of lines a feeder hands over is diagnosed as its
// lines are: a cause found in it is written at once, the held-back generic
// one waits for the exit, and the noise lines the matcher passes on are
// shed when the feeder is behind, and only then. Noise is the per-channel
// lines, never a WARN line or an error.
func TestWatchFeed(t *testing.T) {
	noise := "gpu-node-00:31000:31097 [0] NCCL INFO Channel 22/0 : 1[1] -> 0[0] [receive] via NET/IB/2/GDRDMA\n"
	healthy := "gpu-node-00:31000:31097 [0] NCCL INFO Connected all rings\n"
	memlock := "node-a:1234:1300 [0] misc/ibvwrap.cc:212 NCCL WARN Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory\n"
	generic := "RuntimeError: NCCL error in: /opt/pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:825, unhandled system error, NCCL version 2.7.8\n"
	for _, c := range []struct {
		name    string
		chunk   string
		printed []string // ids printed while CMD runs
		found   []string // ids of Diagnoses at the exit
	}{
		{"a cause", strings.Repeat(noise+healthy, 50) + memlock + strings.Repeat(healthy, 10), []string{"memlock"}, []string{"memlock"}},
		{"the generic one is held back", strings.Repeat(healthy, 10) + generic, nil, []string{"nccl-error"}},
		{"noise only", strings.Repeat(noise, 100), nil, nil},
	} {
		for _, behind := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/behind=%v", c.name, behind), func(t *testing.T) {
				var stderr bytes.Buffer
				w := NewWatch(Facts{}, &stderr, nil)
				shed := w.Feed([]byte(c.chunk), behind)
				ds, _, written := w.Result()
				var printed []string
				for id := range written {
					printed = append(printed, id)
				}
				assert.ElementsMatch(t, c.printed, printed)
				for _, id := range c.printed {
					assert.Contains(t, stderr.String(), string(Message(findDiagnosis(t, ds, id))))
				}
				if len(c.printed) == 0 {
					assert.Empty(t, stderr.String())
				}
				var found []string
				for _, d := range ds {
					found = append(found, d.ID)
				}
				assert.ElementsMatch(t, c.found, found)
				if !behind {
					assert.Zero(t, shed, "nothing is shed while the tap keeps up")
				} else if strings.Contains(c.chunk, noise) {
					assert.Positive(t, shed, "the receive lines pass the filter and are noise")
				}
			})
		}
	}
	for _, l := range []string{noise} {
		assert.True(t, Noise([]byte(strings.TrimSuffix(l, "\n"))), l)
	}
	for _, l := range []string{memlock, generic} {
		assert.False(t, Noise([]byte(strings.TrimSuffix(l, "\n"))), l)
	}
}

func findDiagnosis(t *testing.T, ds []Diagnosis, id string) Diagnosis {
	t.Helper()
	for _, d := range ds {
		if d.ID == id {
			return d
		}
	}
	require.Failf(t, "no diagnosis", "%s", id)
	return Diagnosis{}
}
