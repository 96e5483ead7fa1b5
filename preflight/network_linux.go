package preflight

import (
	"fmt"
	"net"
	"syscall"
	"unsafe"
)

// addrsByIndex returns the addresses of every interface, keyed by
// interface index, from one RTM_GETADDR netlink dump. It gives what
// net.Interface.Addrs gives for each interface (the same selection rules as
// net's newAddr: IFA_LOCAL before IFA_ADDRESS on point-to-point links),
// but Addrs makes one dump per interface: on a node with a dozen
// interfaces that was most of the network check's cost.
func addrsByIndex() (map[int][]net.Addr, error) {
	tab, err := syscall.NetlinkRIB(syscall.RTM_GETADDR, syscall.AF_UNSPEC)
	if err != nil {
		return nil, fmt.Errorf("netlink RTM_GETADDR: %w", err)
	}
	msgs, err := syscall.ParseNetlinkMessage(tab)
	if err != nil {
		return nil, fmt.Errorf("parse netlink addresses: %w", err)
	}
	out := map[int][]net.Addr{}
loop:
	for _, m := range msgs {
		switch m.Header.Type {
		case syscall.NLMSG_DONE:
			break loop
		case syscall.RTM_NEWADDR:
			if len(m.Data) < syscall.SizeofIfAddrmsg {
				continue
			}
			ifam := (*syscall.IfAddrmsg)(unsafe.Pointer(&m.Data[0]))
			attrs, err := syscall.ParseNetlinkRouteAttr(&m)
			if err != nil {
				return nil, fmt.Errorf("parse netlink address attributes: %w", err)
			}
			if a := netlinkAddr(ifam, attrs); a != nil {
				out[int(ifam.Index)] = append(out[int(ifam.Index)], a)
			}
		}
	}
	return out, nil
}

// netlinkAddr is net's newAddr (net/interface_linux.go): the address of
// one RTM_NEWADDR message, nil when it has none.
func netlinkAddr(ifam *syscall.IfAddrmsg, attrs []syscall.NetlinkRouteAttr) net.Addr {
	p2p := false
	for _, a := range attrs {
		if a.Attr.Type == syscall.IFA_LOCAL {
			p2p = true
			break
		}
	}
	for _, a := range attrs {
		if p2p && a.Attr.Type == syscall.IFA_ADDRESS {
			continue
		}
		switch ifam.Family {
		case syscall.AF_INET:
			if len(a.Value) < net.IPv4len {
				continue
			}
			return &net.IPNet{IP: net.IPv4(a.Value[0], a.Value[1], a.Value[2], a.Value[3]), Mask: net.CIDRMask(int(ifam.Prefixlen), 8*net.IPv4len)}
		case syscall.AF_INET6:
			if len(a.Value) < net.IPv6len {
				continue
			}
			ip := make(net.IP, net.IPv6len)
			copy(ip, a.Value)
			return &net.IPNet{IP: ip, Mask: net.CIDRMask(int(ifam.Prefixlen), 8*net.IPv6len)}
		}
	}
	return nil
}
