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

	"github.com/ncclrun/ncclrun/internal/pinrule"
	"github.com/ncclrun/ncclrun/internal/rlimit"
	"github.com/ncclrun/ncclrun/internal/safefile"
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
	// SECBIT_NOROOT: root gains no capabilities at exec (capabilities(7)).
	if bits, err := unix.PrctlRetInt(unix.PR_GET_SECUREBITS, 0, 0, 0, 0); err == nil {
		st.NoRoot = bits&secbitNoRoot != 0
		st.NoAmbientRaise = bits&secbitNoCapAmbientRaise != 0
	}
	return st, nil
}

// secbitNoRoot is SECBIT_NOROOT of prctl(PR_GET_SECUREBITS), and
// secbitNoCapAmbientRaise SECBIT_NO_CAP_AMBIENT_RAISE.
const (
	secbitNoRoot            = 1 << 0
	secbitNoCapAmbientRaise = 1 << 6
)

// liveMemlock returns this process's RLIMIT_MEMLOCK.
func liveMemlock() (Rlimit, error) {
	return rlimit.Get(rlimit.Memlock)
}

// liveStack returns this process's RLIMIT_STACK.
func liveStack() (Rlimit, error) {
	return rlimit.Get(unix.RLIMIT_STACK)
}

// statfsSize returns the size in bytes of the filesystem holding path.
func statfsSize(path string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, fmt.Errorf("statfs %q: %w", path, err)
	}
	return int64(st.Blocks) * int64(st.Bsize), nil
}

// openPathFlag opens a file only to name it (O_PATH): no device is
// opened, nothing blocks, and fstatfs(2) still answers.
const openPathFlag = unix.O_PATH

// fstatfsSize is statfsSize of an open file.
func fstatfsSize(f *os.File) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &st); err != nil {
		return 0, fmt.Errorf("statfs %q: %w", f.Name(), err)
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

// execFileCaps reads the file capability of the file the kernel runs when
// path is exec'd: path itself, or for a #! script its interpreter (as
// binfmt_script, up to maxInterp levels), whose path it returns. Each file
// must be a regular file, and only such a file is opened (safefile.OpenFollow);
// only its first bytes are read. A capability on
// a nosuid mount is not honoured at exec, so it counts as none.
func execFileCaps(path string) (string, pinrule.ExecFile, error) {
	for range maxInterp + 1 {
		file, err := safefile.OpenFollow(path)
		if err != nil {
			return path, pinrule.ExecFile{}, err
		}
		f, interp, err := fdExecCaps(int(file.Fd()), path)
		_ = file.Close()
		if err != nil || interp == "" {
			return path, f, err
		}
		path = interp
	}
	return path, pinrule.ExecFile{}, fmt.Errorf("%s: more than %d #! interpreters", path, maxInterp)
}

// fdExecCaps is execFileCaps for one open file: the interpreter when it
// is a #! script, else its file capability.
func fdExecCaps(fd int, path string) (pinrule.ExecFile, string, error) {
	var none pinrule.ExecFile
	head := make([]byte, binprmBuf)
	n, err := unix.Read(fd, head)
	if err != nil {
		return none, "", &os.PathError{Op: "read", Path: path, Err: err}
	}
	if interp, ok := shebang(head[:max(n, 0)]); ok {
		return none, interp, nil
	}
	var fs unix.Statfs_t
	if err := unix.Fstatfs(fd, &fs); err != nil {
		return none, "", &os.PathError{Op: "fstatfs", Path: path, Err: err}
	}
	if fs.Flags&unix.ST_NOSUID != 0 {
		return none, "", nil
	}
	buf := make([]byte, 64)
	n, err = unix.Fgetxattr(fd, "security.capability", buf)
	if errors.Is(err, unix.ENODATA) || errors.Is(err, unix.ENOTSUP) {
		return none, "", nil
	}
	if err != nil {
		return none, "", &os.PathError{Op: "getxattr security.capability", Path: path, Err: err}
	}
	f, err := parseVFSCap(buf[:n])
	if err != nil {
		return none, "", fmt.Errorf("%s: %w", path, err)
	}
	return f, "", nil
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
