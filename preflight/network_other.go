//go:build !linux

package preflight

import "net"

// addrsByIndex returns the addresses of every interface keyed by index
// (elsewhere than Linux: one net.Interface.Addrs call per interface).
func addrsByIndex() (map[int][]net.Addr, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	out := map[int][]net.Addr{}
	for _, i := range ifs {
		if a, err := i.Addrs(); err == nil {
			out[i.Index] = a
		}
	}
	return out, nil
}
