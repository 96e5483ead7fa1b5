package preflight

import (
	"context"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ncclrun/ncclrun/internal/environ"
)

// TestLiveInterfaces: this machine's interfaces in net's order, with
// the addresses Interface.Addrs gives each, less the IPv6 loopback, which
// NCCL leaves out.
func TestLiveInterfaces(t *testing.T) {
	ifs, err := net.Interfaces()
	require.NoError(t, err)
	got, err := liveInterfaces()
	require.NoError(t, err)
	require.Len(t, got, len(ifs))
	for k, i := range ifs {
		assert.Equal(t, i.Name, got[k].Name)
		assert.Equal(t, i.Flags&net.FlagUp != 0, got[k].Up, i.Name)
		assert.NotContains(t, got[k].Addrs, "::1", i.Name)
		addrs, err := i.Addrs()
		require.NoError(t, err)
		var want []string
		for _, a := range addrs {
			if ip := a.(*net.IPNet).IP; ip.To4() != nil || !ip.IsLoopback() {
				want = append(want, ip.String())
			}
		}
		assert.Equal(t, want, got[k].Addrs, i.Name)
		if i.Flags&net.FlagLoopback != 0 && i.Flags&net.FlagUp != 0 {
			assert.Contains(t, got[k].Addrs, "127.0.0.1", i.Name)
		}
	}
}

// TestRunLiveInOrder: on the live system the interfaces and NCCL's version
// are read beside the other checks; the report holds every check in
// order, and the network and env-sanity results are those of the same
// readers called one after the other.
func TestRunLiveInOrder(t *testing.T) {
	env := []string{"PATH=/usr/bin:/bin", "LD_LIBRARY_PATH=/nonexistent:/usr/lib", "NCCL_SOCKET_IFNAME=lo"}
	rep := Run(context.Background(), Options{Root: "/", Env: env})
	var ids []string
	byID := map[string]Result{}
	for _, r := range rep.Checks {
		ids = append(ids, r.ID)
		byID[r.ID] = r
	}
	assert.Equal(t, []string{IDEnvironment, IDMemlock, IDCapabilities, IDRDMA, IDShm, IDGPU, IDGPUDirect, IDNetwork, IDEnvSanity}, ids)

	s := newRoot("/")
	conf, _ := ncclConfig(s, env)
	merged := environ.Map(env)
	for k, v := range conf {
		if _, set := merged[k]; !set {
			merged[k] = v
		}
	}
	ifs, err := interfaces(s)
	assert.Equal(t, checkNetwork(ifs, err, merged), byID[IDNetwork])
	assert.Equal(t, ncclVersion(s, merged), rep.Facts.NCCLVersion)
	assert.Equal(t, rep.Facts.NCCLVersion.Known(), byID[IDEnvSanity].Details["nccl_version"] != nil)
}
