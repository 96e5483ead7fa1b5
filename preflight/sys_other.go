//go:build !linux

package preflight

import (
	"net"
	"os"

	"github.com/ncclrun/ncclrun/internal/pinrule"
)

func liveStatus() (procStatus, error) { return procStatus{}, ErrUnsupported }
func liveMemlock() (Rlimit, error)    { return Rlimit{}, ErrUnsupported }
func liveStack() (Rlimit, error)      { return Rlimit{}, ErrUnsupported }
func statfsSize(string) (int64, error) {
	return 0, ErrUnsupported
}
func openRW(string) error { return ErrUnsupported }

const openPathFlag = os.O_RDONLY

func fstatfsSize(*os.File) (int64, error) { return 0, ErrUnsupported }
func execFileCaps(p string) (string, pinrule.ExecFile, error) {
	return p, pinrule.ExecFile{}, ErrUnsupported
}

// liveAddrs maps the index of each of ifs to its addresses; an interface
// whose addresses cannot be read has none.
func liveAddrs(ifs []net.Interface) map[int][]net.IP {
	out := map[int][]net.IP{}
	for _, i := range ifs {
		addrs, _ := i.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok {
				out[i.Index] = append(out[i.Index], ipn.IP)
			}
		}
	}
	return out
}
