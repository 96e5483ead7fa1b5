//go:build !linux || mips || mipsle || mips64 || mips64le

package launcher

import "os"

// inheritedIgnore asks the kernel only on Linux, and not on MIPS, whose
// sigaction puts its flags first: here signal.Ignored decides alone.
func inheritedIgnore(os.Signal) bool { return false }
