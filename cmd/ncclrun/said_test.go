package main

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lostPeerThenAgent is a torchrun node whose peer node went away (torch
// 1.13, gloo): the worker's lost peer, then the agent's keep-alive
// warning and its exit-barrier store timeout.
const lostPeerThenAgent = `RuntimeError: [./gloo/transport/tcp/pair.cc:598] Connection closed by peer [10.77.0.2]:55707
ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 0 (pid: 19398) of binary: /usr/bin/python3
WARNING:torch.distributed.elastic.rendezvous.dynamic_rendezvous:The node 'node-b_19345_0' has failed to send a keep-alive heartbeat to the rendezvous 'job77' due to an error of type RendezvousConnectionError.
ERROR:torch.distributed.elastic.agent.server.api:Error waiting on exit barrier. Elapsed: 623.32079911232 seconds
Traceback (most recent call last):
  File "/usr/lib/python3/dist-packages/torch/distributed/elastic/agent/server/api.py", line 906, in _exit_barrier
    store_util.barrier(
  File "/usr/lib/python3/dist-packages/torch/distributed/elastic/utils/store.py", line 34, in get_all
    data = store.get(f"{prefix}{idx}")
RuntimeError: Socket Timeout
`

// Promise: what run said while CMD ran (the lost peer) is what its
// report, exit summary and termination message name; torchrun's own
// exit-barrier timeout after the worker failed is no cause of its own.
func TestRunKeepsTheLostPeer(t *testing.T) {
	r, report, termLog := runPrinting(t, lostPeerThenAgent)
	assert.Contains(t, r.stderr, "A peer stopped answering")
	assert.NotContains(t, r.stderr, "late rank")

	msg, err := os.ReadFile(termLog)
	require.NoError(t, err)
	assert.Contains(t, string(msg), "peer-lost")
	assert.NotContains(t, string(msg), "collective-timeout")

	data, err := os.ReadFile(report)
	require.NoError(t, err)
	var rr struct {
		FirstFailure struct {
			ID   string `json:"id"`
			Host string `json:"host"`
		} `json:"first_failure"`
		Diagnoses []struct {
			ID string `json:"id"`
		} `json:"diagnoses"`
	}
	require.NoError(t, json.Unmarshal(data, &rr))
	assert.Equal(t, "peer-lost", rr.FirstFailure.ID)
	assert.Equal(t, "10.77.0.2", rr.FirstFailure.Host)
	require.Len(t, rr.Diagnoses, 1)
	assert.Equal(t, "peer-lost", rr.Diagnoses[0].ID)
}
