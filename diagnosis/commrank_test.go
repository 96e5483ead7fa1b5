package diagnosis

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFirstFailureRankFromCommLine: NCCL's `comm 0x... rank N nranks M`
// INFO names the rank of the process that printed it, so a failure first
// seen on that process's line has that rank, whether the comm line came
// before or after it; a process's first comm line is its rank (a later
// communicator numbers it anew).
func TestFirstFailureRankFromCommLine(t *testing.T) {
	const (
		comm   = "a100-node-4:5101:5190 [5] NCCL INFO comm 0x55f7d131cee0 rank 5 nranks 16 cudaDev 5 nvmlDev 5 busId b7000 commId 0x6c1d2a9f0b8e4437 - Init START\n"
		comm21 = "a100-node-4:5101:5190 [5] NCCL INFO ncclCommInitRank comm 0x55f7d131cee0 rank 5 nranks 16 cudaDev 5 nvmlDev 5 busId b7000 commId 0x6c1d2a9f0b8e4437 - Init COMPLETE\n"
		sub    = "a100-node-4:5101:5190 [5] NCCL INFO comm 0x55f7d1aa0000 rank 1 nRanks 2 nNodes 1 localRanks 2 localRank 1 MNNVL 0\n"
		other  = "a100-node-4:5102:5191 [6] NCCL INFO comm 0x55f7d131cee8 rank 6 nranks 16 cudaDev 6 nvmlDev 6 busId bd000 commId 0x6c1d2a9f0b8e4437 - Init START\n"
		oom    = "a100-node-4:5101:5190 [5] include/alloc.h:157 NCCL WARN Cuda failure 'out of memory'\n"
	)
	tests := []struct {
		name string
		log  string
		rank int
	}{
		{"comm line before", other + comm + oom, 5},
		{"comm line after", oom + other + comm21, 5},
		{"a sub-communicator later", comm + sub + oom, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMatcher(Facts{})
			require.NoError(t, FeedReader(m, strings.NewReader(tt.log)))
			f := m.FirstFailure()
			require.NotNil(t, f)
			assert.Equal(t, "cuda-oom", f.ID)
			assert.Equal(t, "a100-node-4", f.Host)
			if assert.NotNil(t, f.Rank) {
				assert.Equal(t, tt.rank, *f.Rank)
			}
		})
	}
	// Another process's comm line says nothing about this one.
	m := NewMatcher(Facts{})
	require.NoError(t, FeedReader(m, strings.NewReader(other+oom)))
	if f := m.FirstFailure(); assert.NotNil(t, f) {
		assert.Nil(t, f.Rank)
	}
}

// TestKnockOnByPeerAddress: an IB completion error that names its peer
// by address is the knock-on of the failure on the host whose NCCL
// Bootstrap or OOB line shows that address.
func TestKnockOnByPeerAddress(t *testing.T) {
	log := "gpu-a:100:100 [0] NCCL INFO Bootstrap : Using eth0:10.1.0.5<0>\n" +
		"gpu-b:200:200 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [RO]; OOB eth0:10.1.0.6<0>\n" +
		"gpu-b:200:210 [3] include/alloc.h:178 NCCL WARN Cuda failure 'out of memory'\n" +
		"gpu-a:100:110 [0] transport/net_ib.cc:1333 NCCL WARN NET/IB : Got completion from peer 10.1.0.6<56243> with error 12, opcode 0, len 0, vendor err 129 (Send)\n"
	ds := explainString(t, log, Facts{})
	require.Equal(t, []string{"cuda-oom", "ib-transport"}, ids(ds))
	assert.Equal(t, "cuda-oom", ds[1].KnockOnOf)
	// The same error naming a peer no line tied to a host links nothing.
	ds = explainString(t, strings.Replace(log, "10.1.0.6<56243>", "10.1.0.9<56243>", 1), Facts{})
	require.Equal(t, []string{"cuda-oom", "ib-transport"}, ids(ds))
	assert.Empty(t, ds[1].KnockOnOf)
}
