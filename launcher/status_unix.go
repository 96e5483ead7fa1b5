//go:build unix

package launcher

import "syscall"

// ResultOf turns a wait status into the Result ncclrun exits with: the
// exit code 0..255 unchanged, or 128+N (modulo 256, as tini does) with
// Signal set when signal N killed the child. It is a pure function.
func ResultOf(ws syscall.WaitStatus) Result {
	switch {
	case ws.Exited():
		return Result{ExitCode: ws.ExitStatus()}
	case ws.Signaled():
		return Result{ExitCode: (128 + int(ws.Signal())) % 256, Signal: ws.Signal()}
	}
	return Result{ExitCode: 255}
}
