package hang

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ncclrun/ncclrun/hang/hangtest"
)

// rasJSONReport is shaped as rasDumpCommsToJSON prints it: a communicator
// of four ranks where rank 3 is missing (dead) and rank 1 launched one
// AllReduce less than the others.
const rasJSONReport = `{
  "nccl_version": "2.28.7",
  "cuda_runtime_version": 12080,
  "cuda_driver_version": 12080,
  "timestamp": "2026-12-07 14:30:00",
  "communicators_count": 1,
  "communicators": [
    {
      "hash": "0x5e8bd0b1f0a2c3d4",
      "secondary_hash": "0xa1b2:0xc3d4",
      "size": 4,
      "ranks_count": 3,
      "missing_ranks_count": 1,
      "ranks": [
        {"rank": 0, "host": "10.0.0.1", "pid": 100, "cuda_dev": 0, "nvml_dev": 0,
          "status": {"init_state": 0, "async_error": 0, "finalize_called": false, "destroy_flag": false, "abort_flag": false},
          "collective_counts": {"Broadcast": 1, "Reduce": 0, "AllGather": 0, "ReduceScatter": 0, "AllReduce": 42}},
        {"rank": 1, "host": "10.0.0.1", "pid": 101, "cuda_dev": 1, "nvml_dev": 1,
          "status": {"init_state": 0, "async_error": 0, "finalize_called": false, "destroy_flag": false, "abort_flag": false},
          "collective_counts": {"Broadcast": 1, "Reduce": 0, "AllGather": 0, "ReduceScatter": 0, "AllReduce": 41}},
        {"rank": 2, "host": "10.0.0.2", "pid": 200, "cuda_dev": 0, "nvml_dev": 0,
          "status": {"init_state": 0, "async_error": 0, "finalize_called": false, "destroy_flag": false, "abort_flag": false},
          "collective_counts": {"Broadcast": 1, "Reduce": 0, "AllGather": 0, "ReduceScatter": 0, "AllReduce": 42}}
      ],
      "missing_ranks": [
        {"rank": 3, "host": "10.0.0.2", "pid": 201, "cuda_dev": 1, "nvml_dev": 1,
          "status": {"unresponsive": true, "considered_dead": true}}
      ]
    }
  ],
  "ras": {"collection_time_sec": 0.012, "timeouts_count": 0}
}
`

// rasTextReport is shaped as rasClientRun's text report of an NCCL
// before 2.28.7 (client_support.cc: the header, "Job summary",
// "Communicators...", "Errors", "Warnings").
const rasTextReport = `NCCL version 2.26.2 compiled with CUDA 12.8
CUDA runtime version 12080, driver version 12080

Job summary
===========

  Nodes  Processes         GPUs  Processes     GPUs
(total)   per node  per process    (total)  (total)
      2          2            1          4        4

Communicators... (0.01s)
=============

Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors
    #  in group  per comm  per node  per comm  in group
    0         1         2         2         4         4   RUNNING  INCOMPLETE,MISMATCH

Errors
======

#0-0 (5e8bd0b1f0a2c3d4) INCOMPLETE
  Missing communicator data from 1 rank
  Rank 3 -- GPU 1 managed by process 201 on node 10.0.0.2

Warnings
========

#0-0 (5e8bd0b1f0a2c3d4) MISMATCH
  Communicator ranks have different AllReduce operation counts
  2 ranks have launched up to operation 42
  Rank 1 has launched up to operation 41 -- GPU 1 managed by process 101 on node 10.0.0.1
`

func TestQueryRAS(t *testing.T) {
	ctx := func() context.Context {
		c, cancel := context.WithTimeout(context.Background(), DefaultBudget)
		t.Cleanup(cancel)
		return c
	}
	t.Run("json", func(t *testing.T) {
		f := &hangtest.RAS{JSON: rasJSONReport, Text: rasTextReport}
		addr := f.Serve(t)
		st := QueryRAS(ctx(), addr)
		assert.Equal(t, []string{"CLIENT PROTOCOL 2", "SET FORMAT json", "STATUS"}, <-f.Got)
		assert.Empty(t, st.Error)
		assert.Equal(t, "json", st.Format)
		assert.Equal(t, "2.28.7", st.NCCLVersion)
		assert.Equal(t, 1, st.Communicators)
		assert.Equal(t, []RASRank{{Comm: "0x5e8bd0b1f0a2c3d4", Rank: 3, Host: "10.0.0.2", PID: 201, Dead: true}}, st.Missing)
		assert.Equal(t, []RASBehind{{Comm: "0x5e8bd0b1f0a2c3d4", Op: "AllReduce", Max: 42,
			Ranks: []RASRank{{Comm: "0x5e8bd0b1f0a2c3d4", Rank: 1, Host: "10.0.0.1", PID: 101, Count: 41}}}}, st.Behind)
		assert.Equal(t, rasJSONReport, string(st.Raw))
	})
	t.Run("text before 2.28.7", func(t *testing.T) {
		f := &hangtest.RAS{Text: rasTextReport}
		st := QueryRAS(ctx(), f.Serve(t))
		assert.Equal(t, []string{"CLIENT PROTOCOL 2", "SET FORMAT json", "STATUS"}, <-f.Got)
		assert.Empty(t, st.Error)
		assert.Equal(t, "text", st.Format)
		assert.Equal(t, "2.26.2", st.NCCLVersion)
		assert.Equal(t, []string{
			"#0-0 (5e8bd0b1f0a2c3d4) INCOMPLETE",
			"  Missing communicator data from 1 rank",
			"  Rank 3 -- GPU 1 managed by process 201 on node 10.0.0.2",
			"#0-0 (5e8bd0b1f0a2c3d4) MISMATCH",
			"  Communicator ranks have different AllReduce operation counts",
			"  2 ranks have launched up to operation 42",
			"  Rank 1 has launched up to operation 41 -- GPU 1 managed by process 101 on node 10.0.0.1",
		}, st.Lines)
	})
	t.Run("refused", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := ln.Addr().String()
		ln.Close()
		st := QueryRAS(ctx(), addr)
		assert.Contains(t, st.Error, "refused")
		assert.Empty(t, st.Format)
	})
	t.Run("silent server: bounded by the deadline", func(t *testing.T) {
		f := &hangtest.RAS{Silent: true}
		addr := f.Serve(t)
		c, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		st := QueryRAS(c, addr)
		assert.Less(t, time.Since(start), DefaultBudget)
		assert.Contains(t, st.Error, "CLIENT PROTOCOL")
	})
	t.Run("slow STATUS: what came is kept, bounded by the deadline", func(t *testing.T) {
		f := &hangtest.RAS{JSON: rasJSONReport, Stall: true}
		addr := f.Serve(t)
		c, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		st := QueryRAS(c, addr)
		assert.Less(t, time.Since(start), DefaultBudget)
		assert.Equal(t, "json", st.Format)
		assert.True(t, st.Truncated)
		assert.Contains(t, st.Error, "read STATUS")
	})
	t.Run("not RAS", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer ln.Close()
		go func() {
			c, err := ln.Accept()
			if err == nil {
				io.WriteString(c, "HTTP/1.1 400 Bad Request\r\n\r\n")
				c.Close()
			}
		}()
		st := QueryRAS(ctx(), ln.Addr().String())
		assert.Contains(t, st.Error, "not a RAS server")
	})
}

// A report longer than MaxRASStatus is cut there, not read whole.
func TestQueryRASBounded(t *testing.T) {
	f := &hangtest.RAS{Text: "NCCL version 2.25.1\n" + strings.Repeat("x", MaxRASStatus+4096)}
	c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st := QueryRAS(c, f.Serve(t))
	assert.True(t, st.Truncated)
	assert.Len(t, st.Raw, MaxRASStatus)
}
