package preflight

import (
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"syscall"
	"unsafe"
)

// linksAndAddrs lists the interfaces in the kernel's order (what
// net.Interfaces gives: the name, index and up flag of each RTM_NEWLINK
// message) and their addresses keyed by index (addrsByIndex's table),
// through one netlink socket: an RTM_GETLINK dump, then an RTM_GETADDR
// dump. Of each link message only the interface name is parsed (net
// parses and copies every attribute of the ~1.5 KiB message). A failed
// link dump is an error worded as net.Interfaces words it; a failed address
// dump leaves every interface without addresses, as before.
func linksAndAddrs() ([]netLink, map[int][]net.Addr, error) {
	routeErr := func(call string, err error) error {
		return &net.OpError{Op: "route", Net: "ip+net", Err: os.NewSyscallError(call, err)}
	}
	nl, err := openNetlink()
	if err != nil {
		return nil, nil, routeErr("netlinkrib", err)
	}
	defer syscall.Close(nl.fd)
	tab, err := nl.dump(syscall.RTM_GETLINK, 1)
	if err != nil {
		return nil, nil, routeErr("netlinkrib", err)
	}
	msgs, err := syscall.ParseNetlinkMessage(tab)
	if err != nil {
		return nil, nil, routeErr("parsenetlinkmessage", err)
	}
	var links []netLink
loop:
	for _, m := range msgs {
		switch m.Header.Type {
		case syscall.NLMSG_DONE:
			break loop
		case syscall.RTM_NEWLINK:
			if len(m.Data) < syscall.SizeofIfInfomsg {
				continue
			}
			ifim := (*syscall.IfInfomsg)(unsafe.Pointer(&m.Data[0]))
			name, err := linkName(m.Data[syscall.SizeofIfInfomsg:])
			if err != nil {
				return nil, nil, routeErr("parsenetlinkrouteattr", err)
			}
			links = append(links, netLink{name: name, index: int(ifim.Index), up: ifim.Flags&syscall.IFF_UP != 0})
		}
	}
	var addrs map[int][]net.Addr
	if tab, err := nl.dump(syscall.RTM_GETADDR, 2); err == nil {
		addrs, _ = parseAddrs(tab)
	}
	return links, addrs, nil
}

// linkName is the IFLA_IFNAME attribute of a link message's attributes
// (its value without the final NUL, as net reads it), with the checks
// syscall.ParseNetlinkRouteAttr makes of every attribute.
func linkName(b []byte) (string, error) {
	name := ""
	for len(b) >= syscall.SizeofRtAttr {
		l := int(binary.NativeEndian.Uint16(b[0:2]))
		typ := binary.NativeEndian.Uint16(b[2:4])
		if l < syscall.SizeofRtAttr || l > len(b) {
			return "", syscall.EINVAL
		}
		if typ == syscall.IFLA_IFNAME && l > syscall.SizeofRtAttr {
			name = string(b[syscall.SizeofRtAttr : l-1])
		}
		l = (l + syscall.RTA_ALIGNTO - 1) &^ (syscall.RTA_ALIGNTO - 1)
		if l > len(b) {
			break
		}
		b = b[l:]
	}
	return name, nil
}

// netlinkSock is a bound NETLINK_ROUTE socket and its port id.
type netlinkSock struct {
	fd  int
	pid uint32
	buf []byte
}

func openNetlink() (*netlinkSock, error) {
	fd, err := syscall.Socket(syscall.AF_NETLINK, syscall.SOCK_RAW|syscall.SOCK_CLOEXEC, syscall.NETLINK_ROUTE)
	if err != nil {
		return nil, err
	}
	if err := syscall.Bind(fd, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	lsa, err := syscall.Getsockname(fd)
	if err != nil {
		syscall.Close(fd)
		return nil, err
	}
	sa, ok := lsa.(*syscall.SockaddrNetlink)
	if !ok {
		syscall.Close(fd)
		return nil, syscall.EINVAL
	}
	// 32 KiB: the largest batch the kernel puts into one message of a
	// dump for a reader whose buffer takes it (fewer recvfrom calls).
	return &netlinkSock{fd: fd, pid: sa.Pid, buf: make([]byte, 32<<10)}, nil
}

// dump is syscall.NetlinkRIB(proto, AF_UNSPEC) on this socket, with
// sequence number seq: the request, then every message up to NLMSG_DONE,
// with the checks NetlinkRIB makes.
func (nl *netlinkSock) dump(proto uint16, seq uint32) ([]byte, error) {
	var req [syscall.NLMSG_HDRLEN + syscall.SizeofRtGenmsg]byte
	binary.NativeEndian.PutUint32(req[0:4], uint32(len(req)))
	binary.NativeEndian.PutUint16(req[4:6], proto)
	binary.NativeEndian.PutUint16(req[6:8], syscall.NLM_F_DUMP|syscall.NLM_F_REQUEST)
	binary.NativeEndian.PutUint32(req[8:12], seq)
	req[16] = syscall.AF_UNSPEC
	if err := syscall.Sendto(nl.fd, req[:], 0, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}); err != nil {
		return nil, err
	}
	var tab []byte
	for {
		n, _, err := syscall.Recvfrom(nl.fd, nl.buf, 0)
		if err != nil {
			return nil, err
		}
		if n < syscall.NLMSG_HDRLEN {
			return nil, syscall.EINVAL
		}
		rb := nl.buf[:n]
		tab = append(tab, rb...)
		msgs, err := syscall.ParseNetlinkMessage(rb)
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			if m.Header.Seq != seq || m.Header.Pid != nl.pid {
				return nil, syscall.EINVAL
			}
			if m.Header.Type == syscall.NLMSG_DONE {
				return tab, nil
			}
			if m.Header.Type == syscall.NLMSG_ERROR {
				return nil, syscall.EINVAL
			}
		}
	}
}

// parseAddrs returns the addresses of every interface, keyed by interface
// index, from an RTM_GETADDR dump. It gives what net.Interface.Addrs gives
// for each interface (the same selection rules as net's newAddr: IFA_LOCAL
// before IFA_ADDRESS on point-to-point links), but Addrs makes one dump
// per interface: on a node with a dozen interfaces that was most of the
// network check's cost.
func parseAddrs(tab []byte) (map[int][]net.Addr, error) {
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
