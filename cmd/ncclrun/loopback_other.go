//go:build !linux

package main

import "net"

// freeLoopback is 127.0.0.1 with a port free now (loopback_linux.go).
func freeLoopback() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return ""
	}
	defer ln.Close()
	return ln.Addr().String()
}
