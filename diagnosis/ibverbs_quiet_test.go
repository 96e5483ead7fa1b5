package diagnosis

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// twoNodeSocketLog is a two-node job over sockets whose image has no
// libibverbs; extra lines go before its last line.
func twoNodeSocketLog(extra ...string) string {
	lines := []string{
		"node-a:100:100 [0] NCCL INFO Failed to open libibverbs.so[.1]",
		"node-a:100:100 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>",
		"node-a:100:100 [0] NCCL INFO Using network Socket",
		"node-b:200:200 [0] NCCL INFO Failed to open libibverbs.so[.1]",
		"node-b:200:200 [0] NCCL INFO Using network Socket",
	}
	lines = append(lines, extra...)
	lines = append(lines, "node-a:100:100 [0] NCCL INFO comm 0x55 rank 0 nRanks 2 nNodes 2 localRanks 1 localRank 0 MNNVL 0")
	return strings.Join(lines, "\n") + "\n"
}

// TestIBVerbsLibraryQuiet: a libibverbs that cannot be loaded says
// nothing when IB is not wanted (NCCL_IB_DISABLE=1 in the log or in run's
// facts), when every rank is on one host, and when the run finished
// healthy (nccl-tests' result table); it is certain only with this
// host's facts showing a usable RDMA device or IB asked for, and likely
// otherwise.
func TestIBVerbsLibraryQuiet(t *testing.T) {
	rdma := Facts{Known: true, MemlockAdequate: true, RDMAPorts: []string{"mlx5_0:1"}, Host: "node-a"}
	tests := []struct {
		name      string
		log       string
		facts     Facts
		certainty string // "": no ibverbs-library at all
	}{
		{"multi-node fallback, no facts", twoNodeSocketLog(), Facts{}, Likely},
		{"this host has a usable HCA", twoNodeSocketLog(), rdma, Certain},
		{"IB asked for", twoNodeSocketLog("node-a:100:100 [0] NCCL INFO NCCL_NET set by environment to IB"), Facts{}, Certain},
		{"NCCL_IB_DISABLE=1 in the log", twoNodeSocketLog("node-a:100:100 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1."), Facts{}, ""},
		{"NCCL_IB_DISABLE=1 in run's facts", twoNodeSocketLog(), Facts{Known: true, MemlockAdequate: true, IBDisabled: true, Host: "node-a"}, ""},
		{"a benchmark that finished", twoNodeSocketLog("# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 1.21 "), Facts{}, ""},
		{"one rank on one host", "gpu1:100:100 [0] NCCL INFO Failed to open libibverbs.so[.1]\n" +
			"gpu1:100:100 [0] NCCL INFO Using network Socket\n" +
			"gpu1:100:100 [0] NCCL INFO comm 0x55 rank 0 nranks 1 cudaDev 0 busId 7000 - Init COMPLETE\n", Facts{}, ""},
		{"ranks of one host", "gpu1:100:100 [0] NCCL INFO Failed to open libibverbs.so[.1]\n" +
			"gpu1:101:101 [1] NCCL INFO Failed to open libibverbs.so[.1]\n" +
			"gpu1:100:100 [0] NCCL INFO Using network Socket\n", Facts{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds := explainString(t, tt.log, tt.facts)
			var got *Diagnosis
			for i := range ds {
				if ds[i].ID == "ibverbs-library" {
					got = &ds[i]
				}
			}
			if tt.certainty == "" {
				assert.Nil(t, got, "%v", ids(ds))
				return
			}
			if assert.NotNil(t, got, "%v", ids(ds)) {
				assert.Equal(t, tt.certainty, got.Certainty)
			}
		})
	}
}
