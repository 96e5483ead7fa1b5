package diagnosis

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSilentDegradationFacts: a log that shows NCCL running without a
// transport the node offers (GPUDirect RDMA disabled, sockets instead of
// IB/EFA) is likely on its own (explain); run's facts make it certain or
// change the id: usable RDMA ports here turn "no device" into
// degraded-transport, the peer-memory module preflight found decides the
// GPUDirect cause, and NCCL's own version line confirms the 2.19-2.22
// nvidia-peermem detection gap.
func TestSilentDegradationFacts(t *testing.T) {
	const (
		gdr       = "learn01:2228637:2230195 [3] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'"
		v221      = "learn01:2228637:2228637 [3] NCCL INFO NCCL version 2.21.5+cuda12.4"
		v223      = "learn01:2228637:2228637 [3] NCCL INFO NCCL version 2.23.4+cuda12.6"
		noDev     = "n1:10:20 [0] NCCL INFO NET/IB : No device found."
		ofiTCP    = "n1:10:20 [0] NCCL INFO NET/OFI Selected Provider is tcp (found 1 nics)"
		ibOff     = "n1:10:20 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1."
		twoNodes  = "n1:10:20 [0] NCCL INFO comm 0x55 rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0"
		oneNode   = "n1:10:20 [0] NCCL INFO comm 0x55 rank 0 nRanks 8 nNodes 1 localRanks 8 localRank 0 MNNVL 0"
		oneNodeL  = "learn01:2228637:2230195 [3] NCCL INFO comm 0x55 rank 3 nRanks 8 nNodes 1 localRanks 8 localRank 3 MNNVL 0"
		otherHost = "n2:11:21 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'"
		socketNet = "n1:10:20 [0] NCCL INFO Using network Socket"
	)
	ports := []string{"mlx5_0:1", "mlx5_1:1"}
	run := Facts{Known: true, MemlockAdequate: true}
	with := func(f Facts, mod func(*Facts)) Facts { mod(&f); return f }
	usable := with(run, func(f *Facts) { f.RDMAPorts = ports })
	noRDMA := with(run, func(f *Facts) { f.NoRDMA = true })
	peermem := with(run, func(f *Facts) { f.GDRModule = GDRModuleNvidiaPeermem })
	none := with(run, func(f *Facts) { f.GDRModule = GDRModuleNone })
	nvMem := with(run, func(f *Facts) { f.GDRModule = GDRModuleNvMem })

	tests := []struct {
		name      string
		lines     []string
		facts     Facts
		id        string // "" = no diagnosis
		certainty string
		cause     string // substring of the cause
	}{
		{"gdr disabled, log alone", []string{gdr}, Facts{}, "gpudirect", Likely, "staged through host memory"},
		{"gdr disabled, run without GPU facts", []string{gdr}, run, "gpudirect", Likely, "staged through host memory"},
		{"gdr disabled, nvidia-peermem loaded, version unknown", []string{gdr}, peermem, "gpudirect", Likely, "nvidia-peermem is loaded"},
		{"gdr disabled, nvidia-peermem loaded, NCCL 2.21", []string{v221, gdr}, peermem, "gpudirect", Certain, "NCCL 2.19 to 2.22 detect only nv_peer_mem"},
		{"version line after the sighting", []string{gdr, v221}, peermem, "gpudirect", Certain, "nvidia-peermem is loaded"},
		{"gdr disabled, nvidia-peermem loaded, NCCL 2.23", []string{v223, gdr}, peermem, "gpudirect", Likely, "nvidia-peermem is loaded"},
		{"gdr disabled, no module at all", []string{gdr}, none, "gpudirect", Certain, "no peer-memory module"},
		{"gdr disabled, nv_mem present", []string{gdr}, nvMem, "gpudirect", Likely, "staged through host memory"},
		{"gdr disabled, single node", []string{gdr, oneNodeL}, none, "", "", ""},
		{"gdr disabled, lines of two hosts", []string{gdr, otherHost}, none, "gpudirect", Certain, "no peer-memory module"},

		{"no device, log alone", []string{noDev}, Facts{}, "rdma-device", Likely, "no usable verbs device"},
		{"no device, usable ports here", []string{noDev}, usable, "degraded-transport", Certain, "mlx5_0:1, mlx5_1:1"},
		{"no device, no RDMA on this host", []string{noDev}, noRDMA, "", "", ""},
		{"no device, single node, usable ports", []string{oneNode, noDev}, usable, "", "", ""},
		{"ofi tcp, log alone", []string{ofiTCP}, Facts{}, "rdma-device", Likely, "libfabric's TCP provider"},
		{"ofi tcp, usable ports here", []string{ofiTCP}, usable, "degraded-transport", Certain, "Preflight saw usable RDMA ports"},
		{"ofi tcp, no RDMA on this host", []string{ofiTCP}, noRDMA, "", "", ""},
		{"sockets chosen, multi-node, usable ports", []string{socketNet, twoNodes}, usable, "degraded-transport", Certain, "NCCL chose its Socket transport"},
		{"sockets chosen, multi-node, log alone", []string{socketNet, twoNodes}, Facts{}, "", "", ""},
		// NCCL_IB_DISABLE=1 alone says nothing of the hardware: on purpose on Ethernet-only clusters.
		{"IB disabled, multi-node, log alone", []string{ibOff, twoNodes}, Facts{}, "", "", ""},
		{"IB disabled, multi-node, usable ports", []string{ibOff, twoNodes}, usable, "degraded-transport", Certain, "mlx5_0:1"},
		{"IB disabled, multi-node, no RDMA here", []string{ibOff, twoNodes}, noRDMA, "", "", ""},
		{"IB disabled, single node", []string{ibOff, oneNode}, Facts{}, "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds, err := Explain(strings.NewReader(strings.Join(tt.lines, "\n")), tt.facts)
			require.NoError(t, err)
			if tt.id == "" {
				assert.Empty(t, ids(ds))
				return
			}
			require.NotEmpty(t, ds)
			assert.Equal(t, tt.id, ds[0].ID)
			assert.Equal(t, tt.certainty, ds[0].Certainty)
			assert.Contains(t, ds[0].Cause, tt.cause)
			if tt.certainty == Likely {
				assert.NotEmpty(t, ds[0].How, "a likely diagnosis says how to tell")
			}
		})
	}
}
