//go:build !linux

package preflight

import "net"

// linksAndAddrs lists the interfaces and their addresses keyed by index
// (elsewhere than Linux: net.Interfaces and one net.Interface.Addrs call
// per interface; an interface whose addresses cannot be read has none).
func linksAndAddrs() ([]netLink, map[int][]net.Addr, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, nil, err
	}
	links := make([]netLink, 0, len(ifs))
	addrs := map[int][]net.Addr{}
	for _, i := range ifs {
		links = append(links, netLink{name: i.Name, index: i.Index, up: i.Flags&net.FlagUp != 0})
		if a, err := i.Addrs(); err == nil {
			addrs[i.Index] = a
		}
	}
	return links, addrs, nil
}
