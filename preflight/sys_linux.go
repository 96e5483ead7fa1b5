//go:build linux

package preflight

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/ncclrun/ncclrun/internal/rlimit"
)

// liveStatus reads the calling thread's credentials. Capabilities are per
// thread in Go, so the goroutine is locked to its thread while status is
// read from /proc/thread-self and no_new_privs is asked with prctl(2).
func liveStatus() (procStatus, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b, err := readLive("/proc/thread-self/status", maxFile, false)
	if err != nil {
		var err2 error
		b, err2 = readLive("/proc/self/status", maxFile, false)
		if err2 != nil {
			return procStatus{}, fmt.Errorf("read /proc/thread-self/status: %w", err)
		}
	}
	st, err := parseStatus(bytes.NewReader(b))
	if err != nil {
		return st, fmt.Errorf("parse /proc/thread-self/status: %w", err)
	}
	nnp, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)
	if err == nil {
		st.NoNewPrivs, st.HasNNP = nnp == 1, true
	}
	return st, nil
}

// liveMemlock returns this process's RLIMIT_MEMLOCK.
func liveMemlock() (Rlimit, error) {
	l, err := rlimit.Get(rlimit.Memlock)
	return Rlimit{Soft: l.Soft, Hard: l.Hard}, err
}

// liveStack returns this process's RLIMIT_STACK.
func liveStack() (Rlimit, error) {
	l, err := rlimit.Get(unix.RLIMIT_STACK)
	return Rlimit{Soft: l.Soft, Hard: l.Hard}, err
}

// statfsSize returns the size in bytes of the filesystem holding path.
func statfsSize(path string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, fmt.Errorf("statfs %q: %w", path, err)
	}
	return int64(st.Blocks) * int64(st.Bsize), nil
}

// openRW checks that a device node can be opened read-write, as
// libibverbs opens /dev/infiniband/uverbsN.
func openRW(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("open %q: %w", path, err)
	}
	return f.Close()
}

// fileCaps reports whether path carries a file capability
// (security.capability extended attribute).
func fileCaps(path string) (bool, error) {
	buf := make([]byte, 64)
	n, err := unix.Getxattr(path, "security.capability", buf)
	if errors.Is(err, unix.ENODATA) || errors.Is(err, unix.ENOTSUP) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("getxattr %q security.capability: %w", path, err)
	}
	return n > 0, nil
}

// liveAddrs maps interface indexes to their addresses from one
// RTM_GETADDR dump of every interface, where Interface.Addrs makes a dump
// for each interface. As net reads them, an address is the message's
// IFA_LOCAL when it has one (on a point-to-point link IFA_ADDRESS is the
// peer's), else its IFA_ADDRESS. When the dump cannot be read, no
// interface has an address, as when each Interface.Addrs fails. The
// interfaces are not needed here (the dump has every index); the
// parameter is there for the other systems' version, which asks each.
func liveAddrs([]net.Interface) map[int][]net.IP {
	tab, err := syscall.NetlinkRIB(syscall.RTM_GETADDR, syscall.AF_UNSPEC)
	if err != nil {
		return map[int][]net.IP{}
	}
	return parseAddrDump(tab)
}

// parseAddrDump is liveAddrs' reading of an RTM_GETADDR dump.
func parseAddrDump(tab []byte) map[int][]net.IP {
	out := map[int][]net.IP{}
	msgs, err := syscall.ParseNetlinkMessage(tab)
	if err != nil {
		return out
	}
	for _, m := range msgs {
		if m.Header.Type == syscall.NLMSG_DONE {
			break
		}
		if m.Header.Type != syscall.RTM_NEWADDR || len(m.Data) < syscall.SizeofIfAddrmsg {
			continue
		}
		attrs, err := syscall.ParseNetlinkRouteAttr(&m)
		if err != nil {
			continue
		}
		size := net.IPv4len
		if m.Data[0] == syscall.AF_INET6 {
			size = net.IPv6len
		} else if m.Data[0] != syscall.AF_INET {
			continue
		}
		var ip []byte
		for _, a := range attrs {
			switch {
			case a.Attr.Type == syscall.IFA_LOCAL:
				ip = a.Value
			case a.Attr.Type == syscall.IFA_ADDRESS && ip == nil:
				ip = a.Value
			}
		}
		if len(ip) < size {
			continue
		}
		index := int(binary.NativeEndian.Uint32(m.Data[4:8])) // struct ifaddrmsg's ifa_index
		out[index] = append(out[index], net.IP(ip[:size]))
	}
	return out
}
