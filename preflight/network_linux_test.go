package preflight

import (
	"net"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLinksAndAddrsMatchNet: the one-socket link and address dumps give,
// for this machine, exactly the interfaces of net.Interfaces (name, index,
// up, in order) and for each exactly what net.Interface.Addrs gives.
func TestLinksAndAddrsMatchNet(t *testing.T) {
	ifs, err := net.Interfaces()
	require.NoError(t, err)
	require.NotEmpty(t, ifs)
	links, got, err := linksAndAddrs()
	require.NoError(t, err)
	require.Len(t, links, len(ifs))
	n := 0
	for k, i := range ifs {
		require.Equal(t, netLink{name: i.Name, index: i.Index, up: i.Flags&net.FlagUp != 0}, links[k])
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

// TestLinkName: IFLA_IFNAME found among other attributes, its NUL cut;
// an attribute longer than the message is an error, as in
// syscall.ParseNetlinkRouteAttr.
func TestLinkName(t *testing.T) {
	attr := func(typ uint16, v string) []byte {
		l := 4 + len(v)
		b := []byte{byte(l), byte(l >> 8), byte(typ), byte(typ >> 8)}
		b = append(b, v...)
		for len(b)%4 != 0 {
			b = append(b, 0)
		}
		return b
	}
	msg := append(append(attr(4 /* IFLA_MTU */, "\x00\x05\x00\x00"), attr(3 /* IFLA_IFNAME */, "eth0\x00")...), attr(1, "\x01\x02\x03\x04\x05\x06")...)
	name, err := linkName(msg)
	require.NoError(t, err)
	require.Equal(t, "eth0", name)
	name, err = linkName(attr(1, "ab"))
	require.NoError(t, err)
	require.Equal(t, "", name)
	_, err = linkName([]byte{40, 0, 3, 0, 'e', 't', 'h', 0})
	require.Error(t, err)
}
