package preflight

import (
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLiveInterfaces: this machine's interfaces in net's order, with
// their addresses less the IPv6 loopback, which NCCL leaves out.
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
		if i.Flags&net.FlagLoopback != 0 && i.Flags&net.FlagUp != 0 {
			assert.Contains(t, got[k].Addrs, "127.0.0.1", i.Name)
		}
	}
}
