package preflight

import (
	"net"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAddrsByIndexMatchesNet: the one-dump address table gives, for every
// interface of this machine, exactly what net.Interface.Addrs gives.
func TestAddrsByIndexMatchesNet(t *testing.T) {
	ifs, err := net.Interfaces()
	require.NoError(t, err)
	require.NotEmpty(t, ifs)
	got, err := addrsByIndex()
	require.NoError(t, err)
	n := 0
	for _, i := range ifs {
		want, err := i.Addrs()
		require.NoError(t, err)
		var w, g []string
		for _, a := range want {
			w = append(w, a.String())
		}
		for _, a := range got[i.Index] {
			g = append(g, a.String())
		}
		require.Equal(t, w, g, "interface %s", i.Name)
		n += len(w)
	}
	require.NotZero(t, n, "no addresses on this machine: the comparison proved nothing")
}
