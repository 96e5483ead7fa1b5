package diagnosis

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	lostPeerLine = "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer [10.77.0.2]:55707\n"
	// exitBarrier is torchrun's agent after its worker failed: its exit
	// barrier at the store of a node that is gone (torch 1.13).
	exitBarrier = "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 0 (pid: 19398) of binary: /usr/bin/python3\n" +
		"ERROR:torch.distributed.elastic.agent.server.api:Error waiting on exit barrier. Elapsed: 623.3 seconds\n" +
		"Traceback (most recent call last):\n" +
		"  File \"/usr/lib/python3/dist-packages/torch/distributed/elastic/agent/server/api.py\", line 906, in _exit_barrier\n" +
		"    store_util.barrier(\n" +
		"  File \"/usr/lib/python3/dist-packages/torch/distributed/elastic/utils/store.py\", line 34, in get_all\n" +
		"    data = store.get(f\"{prefix}{idx}\")\n" +
		"RuntimeError: Socket Timeout\n"
)

// TestLostPeerBeforeAgentTimeouts: a lost Gloo peer, then torchrun's own
// exit-barrier timeout, is the lost peer: the agent's store timeout after
// a worker failed is no failure, and a lost peer seen before a timeout
// that follows it is not folded into that timeout.
func TestLostPeerBeforeAgentTimeouts(t *testing.T) {
	ds := explainString(t, lostPeerLine+exitBarrier, Facts{})
	require.NotEmpty(t, ds)
	assert.Equal(t, []string{"peer-lost"}, ids(ds))
	m := NewMatcher(Facts{})
	require.NoError(t, FeedReader(m, strings.NewReader(lostPeerLine+exitBarrier)))
	if f := m.FirstFailure(); assert.NotNil(t, f) {
		assert.Equal(t, "peer-lost", f.ID)
		assert.Equal(t, "10.77.0.2", f.Host)
	}

	// A worker's own store timeout after the lost peer still counts,
	// and the lost peer stays beside it, first seen.
	ds = explainString(t, lostPeerLine+"RuntimeError: Socket Timeout\n", Facts{})
	assert.Equal(t, []string{"collective-timeout", "peer-lost"}, ids(ds))
	if assert.Len(t, ds, 2) {
		assert.Empty(t, ds[1].KnockOnOf, "seen before the timeout")
	}
}

// TestWatchKeepsWhatItSaid: a diagnosis written while the command ran
// stays in Result (so in run's report, exit summary and termination
// message) when the matcher later folds it into a cause seen after it.
func TestWatchKeepsWhatItSaid(t *testing.T) {
	var out bytes.Buffer
	w := NewWatch(Facts{}, &out, nil)
	w.Feed([]byte(lostPeerLine), false)
	require.Contains(t, out.String(), "A peer stopped answering")
	w.Feed([]byte("node-b:7:7 [3] misc/shmutils.cc:113 NCCL WARN Error while creating shared memory segment /dev/shm/nccl-Xc3v1 (size 9637888)\n"), false)
	ds, _, written := w.Result()
	assert.Equal(t, []string{"shm", "peer-lost"}, ids(ds))
	assert.True(t, written["peer-lost"])
	assert.True(t, written["shm"])

	// The matcher alone folds it: the Watch is what keeps it.
	assert.Equal(t, []string{"shm"}, ids(explainString(t, lostPeerLine+"node-b:7:7 [3] misc/shmutils.cc:113 NCCL WARN Error while creating shared memory segment /dev/shm/nccl-Xc3v1 (size 9637888)\n", Facts{})))
}
