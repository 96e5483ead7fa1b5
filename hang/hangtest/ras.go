// Package hangtest serves a fake NCCL RAS client socket for tests.
package hangtest

import (
	"bufio"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// RAS is NCCL's RAS client socket as src/ras/client_support.cc serves
// it (rasClientEventLoop): commands are lines, case-insensitive, a
// trailing '\r' dropped; "CLIENT PROTOCOL n" answers "SERVER PROTOCOL 2";
// "SET FORMAT json|text" answers OK where the version serves it (2.28.7+)
// and "ERROR: Unknown command ..." before; STATUS streams the report in
// chunks, then the server closes. Serve starts it on a loopback port
// and returns its address; the test's end stops it.
type RAS struct {
	JSON, Text string        // the reports; JSON "" is a server before 2.28.7
	Then       string        // the JSON report of every connection after the first ("": JSON)
	Silent     bool          // answers nothing
	Stall      bool          // answers the handshake, never STATUS
	Got        chan []string // the commands of each connection, once it closed
}

func (f *RAS) Serve(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	f.Got = make(chan []string, 8)
	go func() {
		for n := 0; ; n++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go f.conn(c, n > 0 && f.Then != "")
		}
	}()
	return ln.Addr().String()
}

func (f *RAS) conn(c net.Conn, then bool) {
	defer c.Close()
	var cmds []string
	defer func() { f.Got <- cmds }()
	r := bufio.NewReader(c)
	format := "text"
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		cmd := strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
		cmds = append(cmds, cmd)
		if f.Silent {
			continue
		}
		lc := strings.ToLower(cmd)
		switch {
		case strings.HasPrefix(lc, "client protocol "):
			io.WriteString(c, "SERVER PROTOCOL 2\n")
		case strings.HasPrefix(lc, "set format ") && f.JSON != "":
			switch v := lc[len("set format "):]; v {
			case "json", "text":
				format = v
				io.WriteString(c, "OK\n")
			default:
				io.WriteString(c, "ERROR: Invalid format "+cmd[len("set format "):]+"\n")
			}
		case (lc == "status" || lc == "verbose status") && f.Stall:
		case lc == "status" || lc == "verbose status":
			rep := f.Text
			if format == "json" {
				rep = f.JSON
				if then {
					rep = f.Then
				}
			}
			for len(rep) > 0 { // in chunks, as the RAS thread sends them
				n := min(len(rep), 100)
				io.WriteString(c, rep[:n])
				rep = rep[n:]
			}
			return
		default:
			io.WriteString(c, "ERROR: Unknown command "+cmd+"\n")
		}
	}
}
