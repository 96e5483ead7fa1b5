package main

import (
	"strconv"

	"golang.org/x/sys/unix"
)

// freeLoopback is 127.0.0.1 with a port free now: RAS's client socket
// serves only local clients (its peers talk over NCCL's bootstrap
// interface), and every job on a node would otherwise share port 28028,
// where another job's RAS may answer. "" when no port could be had. The
// port is asked of the kernel with three system calls: the net package's
// Listen first probes the host's IPv6 and MPTCP support, a third of a
// millisecond on every run's start.
func freeLoopback() string {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return ""
	}
	defer unix.Close(fd)
	if unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}) != nil {
		return ""
	}
	sa, err := unix.Getsockname(fd)
	in, ok := sa.(*unix.SockaddrInet4)
	if err != nil || !ok || in.Port == 0 {
		return ""
	}
	return "127.0.0.1:" + strconv.Itoa(in.Port)
}
