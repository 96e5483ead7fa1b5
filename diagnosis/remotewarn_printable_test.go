package diagnosis

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestRemoteWarnRepeatedFirstControl: TestRemoteWarnRepeatedFirst with
// a line a colouring collector ended with an SGR reset: the repetition
// is recognised whatever control characters the message carries.
func TestRemoteWarnRepeatedFirstControl(t *testing.T) {
	const msg = "Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory\x1b[0m"
	log := "[rank0]: Last error:\n[rank0]: " + msg + "\n" +
		"node1:25:27 [0] misc/ibvwrap.cc:169 NCCL WARN " + msg + "\n"
	ds := explainString(t, log, node0)
	assert.Equal(t, []string{"memlock"}, ids(ds))
	if len(ds) > 0 {
		assert.Equal(t, []string{"node1"}, ds[0].Hosts)
	}
}
