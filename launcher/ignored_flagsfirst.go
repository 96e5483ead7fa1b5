//go:build linux && (mips || mipsle || mips64 || mips64le)

package launcher

import "os"

// inheritedIgnore: MIPS's sigaction puts its flags first; not asked there,
// signal.Ignored decides.
func inheritedIgnore(os.Signal) bool { return false }
