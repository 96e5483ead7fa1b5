package diagnosis

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTorchrunSummary: under real torchrun with @record, the failure
// summary reprints each failing rank's traceback (indented, "Last error:"
// text included) after the rank printed it itself; a process counts once,
// whatever reprints it (testdata/torchrun/README.md). Before the summary
// was followed, the 2-rank logs said 4 and 8 processes.
func TestTorchrunSummary(t *testing.T) {
	tests := []struct {
		file         string
		id           string
		count, lines int
		hosts        []string
	}{
		{"record-generic-2.log", "nccl-error", 2, 8, []string{}},
		{"record-generic-4.log", "nccl-error", 4, 16, []string{}},
		{"record-lasterror-2.log", "socket-interface", 2, 4, []string{}},
		{"record-lasterror-2-glued.log", "socket-interface", 2, 4, []string{}},
		{"record-lasterror-2-carets.log", "socket-interface", 2, 4, []string{}},
		{"record-warn-2.log", "socket-interface", 2, 6, []string{"vm"}},
		{"record-warn-4.log", "socket-interface", 4, 12, []string{"vm"}},
		{"norecord-generic-2.log", "nccl-error", 2, 4, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			data, err := os.ReadFile("testdata/torchrun/" + tt.file)
			require.NoError(t, err)
			ds := explainString(t, string(data), Facts{})
			require.NotEmpty(t, ds)
			assert.Equal(t, tt.id, ds[0].ID)
			assert.Equal(t, tt.count, ds[0].Count, "processes")
			assert.Equal(t, tt.lines, ds[0].Lines, "lines")
			assert.Equal(t, tt.hosts, ds[0].Hosts)
			assert.False(t, ds[0].CountCapped)
		})
	}
}

// summaryEntry is one worker's entry of torchrun's failure summary, as
// torch/distributed/elastic/multiprocessing/errors formats it.
func summaryEntry(idx int, host string, rank, pid int, tb ...string) string {
	s := "[" + itoa(idx) + "]:\n  time      : 2026-12-01_08:35:48\n  host      : " + host +
		"\n  rank      : " + itoa(rank) + " (local_rank: " + itoa(rank) + ")\n  exitcode  : 1 (pid: " + itoa(pid) +
		")\n  error_file: /tmp/torchelastic_x/attempt_0/" + itoa(rank) + "/error.json\n  traceback : Traceback (most recent call last):\n" +
		"    File \"/job/train.py\", line 9, in main\n      dist.all_reduce(t)\n"
	for _, l := range tb {
		s += "  " + l + "\n"
	}
	return s
}

func TestTorchrunSummaryCounts(t *testing.T) {
	const (
		rt   = "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1275, unhandled system error, NCCL version 2.14.3"
		sys  = "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error."
		text = "Call to ibv_reg_mr failed with error Cannot allocate memory"
	)
	raw := func(last string) string {
		return "Traceback (most recent call last):\n" + rt + "\n" + sys + "\nLast error:\n" + last + "\n\n"
	}
	warn := func(host string, pid int) string {
		return host + ":" + itoa(pid) + ":" + itoa(pid+3) + " [0] misc/ibvwrap.cc:190 NCCL WARN " + text + "\n"
	}
	sep := strings.Repeat("-", 60) + "\n"
	tests := []struct {
		name   string
		log    string
		id     string
		count  int
		hosts  []string
		capped bool
	}{
		{"two nodes, two ranks each, WARNs and summaries (fqdn hosts)",
			warn("node-1", 11) + warn("node-1", 12) + warn("node-2", 11) + warn("node-2", 22) +
				raw(text) + raw(text) + raw(text) + raw(text) +
				"Failures:\n" + summaryEntry(1, "node-1.cluster.local", 1, 12, rt, sys, "Last error:", text) + sep +
				"Root Cause (first observed failure):\n" + summaryEntry(0, "node-1.cluster.local", 0, 11, rt, sys, "Last error:", text) +
				"Failures:\n" + summaryEntry(1, "node-2.cluster.local", 1, 22, rt, sys, "Last error:", text) + sep +
				"Root Cause (first observed failure):\n" + summaryEntry(0, "node-2.cluster.local", 0, 11, rt, sys, "Last error:", text),
			"memlock", 4, []string{"node-1", "node-2"}, false},
		{"generic: three ranks, summaries only name them",
			raw("") + raw("") + raw("") + "Failures:\n" + summaryEntry(1, "n", 1, 7, rt, sys) + summaryEntry(2, "n", 2, 8, rt, sys) + sep +
				"Root Cause (first observed failure):\n" + summaryEntry(0, "n", 0, 6, rt, sys),
			"nccl-error", 3, []string{"n"}, false},
		{"without @record: an exception and its continuation lines are one process",
			raw("") + raw(""), "nccl-error", 2, []string{}, false},
		{"a summary line that is not indented ends the entry",
			"Failures:\n" + summaryEntry(1, "n", 1, 7, rt) + "RuntimeError: NCCL error in: other.cpp:1, unhandled system error\n",
			"nccl-error", 2, []string{"n"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds := explainString(t, tt.log, Facts{})
			require.NotEmpty(t, ds)
			assert.Equal(t, tt.id, ds[0].ID, ids(ds))
			assert.Equal(t, tt.count, ds[0].Count, "processes")
			assert.Equal(t, tt.hosts, ds[0].Hosts)
			assert.Equal(t, tt.capped, ds[0].CountCapped)
		})
	}
}

func TestExceptionHeader(t *testing.T) {
	for s, want := range map[string]bool{
		"RuntimeError: NCCL error in: x":                     true,
		"torch.distributed.DistBackendError: NCCL error in:": true,
		"torch.cuda.OutOfMemoryError: CUDA out of memory.":   true,
		"ncclSystemError: System call failed":                false,
		"Error: failed to extend /dev/shm":                   true,
		"socketStartConnect: Connect to 10.0.0.2 failed":     false,
		"RuntimeError": false,
		"":             false,
	} {
		assert.Equal(t, want, isExceptionHeader([]byte(s)), s)
	}
}

// TestTorchrunPortInUse: torch 1.13's c10d store that cannot bind its
// port (a real capture of two torchruns on one --master_port) is
// port-in-use from the RuntimeError that ends the agent. c10d's own
// bind/listen log lines before it are no failure by themselves: torch
// 1.13's c10d rendezvous lets every agent on the endpoint's host try to
// host the store, and the ones that lose log them and go on as clients.
func TestTorchrunPortInUse(t *testing.T) {
	data, err := os.ReadFile("testdata/torchrun/port-in-use-2.log")
	require.NoError(t, err)
	whole := string(data)
	ds := explainString(t, whole, Facts{})
	require.NotEmpty(t, ds)
	assert.Equal(t, "port-in-use", ds[0].ID)
	assert.Len(t, ds, 1)
	cut := whole[:strings.Index(whole, "Traceback")]
	require.Contains(t, cut, "failed to listen on any local network address")
	assert.Empty(t, explainString(t, cut, Facts{}), "the log lines of an agent that lost the race to host the store")
}
