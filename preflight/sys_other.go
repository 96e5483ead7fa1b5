//go:build !linux

package preflight

func liveStatus() (procStatus, error) { return procStatus{}, ErrUnsupported }
func liveMemlock() (Rlimit, error)    { return Rlimit{}, ErrUnsupported }
func statfsSize(string) (int64, error) {
	return 0, ErrUnsupported
}
func openRW(string) error           { return ErrUnsupported }
func fileCaps(string) (bool, error) { return false, ErrUnsupported }
