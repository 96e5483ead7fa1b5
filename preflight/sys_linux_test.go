package preflight

import (
	"encoding/binary"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// attr is one route attribute of a netlink message built by addrMsg.
type attr struct {
	typ   uint16
	value []byte
}

// addrMsg builds one netlink message of type typ whose body is a struct
// ifaddrmsg (family, index) and attrs, each padded to 4 bytes.
func addrMsg(typ uint16, family byte, index uint32, attrs ...attr) []byte {
	body := make([]byte, syscall.SizeofIfAddrmsg)
	body[0] = family
	binary.NativeEndian.PutUint32(body[4:], index)
	for _, a := range attrs {
		h := make([]byte, syscall.SizeofRtAttr)
		binary.NativeEndian.PutUint16(h[0:], uint16(syscall.SizeofRtAttr+len(a.value)))
		binary.NativeEndian.PutUint16(h[2:], a.typ)
		body = append(append(body, h...), a.value...)
		for len(body)%4 != 0 {
			body = append(body, 0)
		}
	}
	h := make([]byte, syscall.NLMSG_HDRLEN)
	binary.NativeEndian.PutUint32(h[0:], uint32(len(h)+len(body)))
	binary.NativeEndian.PutUint16(h[4:], typ)
	return append(h, body...)
}

func TestParseAddrDump(t *testing.T) {
	v4 := func(s string) []byte { return net.ParseIP(s).To4() }
	v6 := func(s string) []byte { return net.ParseIP(s).To16() }
	join := func(msgs ...[]byte) []byte {
		var b []byte
		for _, m := range msgs {
			b = append(b, m...)
		}
		return b
	}
	done := addrMsg(syscall.NLMSG_DONE, 0, 0)
	tests := []struct {
		name string
		dump []byte
		want map[int][]net.IP
	}{
		{"addresses by index in dump order", join(
			addrMsg(syscall.RTM_NEWADDR, syscall.AF_INET, 1, attr{syscall.IFA_ADDRESS, v4("127.0.0.1")}, attr{syscall.IFA_LOCAL, v4("127.0.0.1")}),
			addrMsg(syscall.RTM_NEWADDR, syscall.AF_INET, 2, attr{syscall.IFA_ADDRESS, v4("10.0.0.2")}),
			addrMsg(syscall.RTM_NEWADDR, syscall.AF_INET6, 2, attr{syscall.IFA_ADDRESS, v6("fd00::2")}),
			done,
		), map[int][]net.IP{1: {v4("127.0.0.1")}, 2: {v4("10.0.0.2"), v6("fd00::2")}}},
		{"point-to-point: the local end, not the peer", join(
			addrMsg(syscall.RTM_NEWADDR, syscall.AF_INET, 3, attr{syscall.IFA_ADDRESS, v4("10.9.0.1")}, attr{syscall.IFA_LOCAL, v4("10.9.0.2")}),
			addrMsg(syscall.RTM_NEWADDR, syscall.AF_INET, 4, attr{syscall.IFA_LOCAL, v4("10.8.0.2")}, attr{syscall.IFA_ADDRESS, v4("10.8.0.1")}),
			done,
		), map[int][]net.IP{3: {v4("10.9.0.2")}, 4: {v4("10.8.0.2")}}},
		{"other families, types, short addresses and what follows the end skipped", join(
			addrMsg(syscall.RTM_NEWADDR, syscall.AF_PACKET, 5, attr{syscall.IFA_ADDRESS, v4("10.0.0.5")}),
			addrMsg(syscall.RTM_NEWLINK, syscall.AF_INET, 5, attr{syscall.IFA_ADDRESS, v4("10.0.0.5")}),
			addrMsg(syscall.RTM_NEWADDR, syscall.AF_INET6, 5, attr{syscall.IFA_ADDRESS, v4("10.0.0.5")}),
			addrMsg(syscall.RTM_NEWADDR, syscall.AF_INET, 5, attr{syscall.IFA_LABEL, []byte("eth5")}),
			done,
			addrMsg(syscall.RTM_NEWADDR, syscall.AF_INET, 6, attr{syscall.IFA_ADDRESS, v4("10.0.0.6")}),
		), map[int][]net.IP{}},
		{"a truncated dump: nothing", addrMsg(syscall.RTM_NEWADDR, syscall.AF_INET, 1, attr{syscall.IFA_ADDRESS, v4("10.0.0.1")})[:20], map[int][]net.IP{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, parseAddrDump(tt.dump))
		})
	}
}

// TestStackLimitLive: on the live system RLIMIT_STACK comes from
// getrlimit(2), and it is what proc/self/limits says.
func TestStackLimitLive(t *testing.T) {
	b, err := os.ReadFile("/proc/self/limits")
	require.NoError(t, err)
	want, ok := parseLimitLine(b, "Max stack size")
	require.True(t, ok)
	got, ok := stackLimit(newRoot("/"))
	require.True(t, ok)
	assert.Equal(t, want, got)
}
