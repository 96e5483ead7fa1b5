package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/ncclrun/ncclrun/diagnosis"
	"github.com/ncclrun/ncclrun/launcher"
)

// TestWatchIsTheTap: run's watch is the launcher's Tap over a
// diagnosis.Watch: a chunk goes to the Watch (a cause in it is printed at
// once), and Shed is diagnosis.Shed: the per-channel lines go, never a
// WARN line or an error.
func TestWatchIsTheTap(t *testing.T) {
	noise := "gpu-node-00:31000:31097 [0] NCCL INFO Channel 22/0 : 1[1] -> 0[0] [receive] via NET/IB/2/GDRDMA\n"
	memlock := "node-a:1234:1300 [0] misc/ibvwrap.cc:212 NCCL WARN Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory\n"
	generic := "RuntimeError: NCCL error in: /opt/pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:825, unhandled system error, NCCL version 2.7.8\n"
	var stderr bytes.Buffer
	w := &watch{Watch: diagnosis.NewWatch(diagnosis.Facts{}, &stderr, nil)}
	var tap launcher.Tap = w
	assert.Zero(t, tap.Lines(launcher.Stdout, []byte(noise+memlock), false))
	_, _, written := w.Result()
	assert.Equal(t, map[string]bool{"memlock": true}, written)
	assert.Contains(t, stderr.String(), "ncclrun: Memory registration failed")
	kept, shed := tap.Shed([]byte(noise + memlock + noise + generic))
	assert.Equal(t, memlock+generic, string(kept))
	assert.Equal(t, 2, shed)
}
