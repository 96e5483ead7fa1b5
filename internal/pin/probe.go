package pin

import (
	"runtime"

	"github.com/ncclrun/ncclrun/internal/caps"
)

// The memlock probe of doctor's --probe is a pin in a child that holds
// exactly the credentials CMD would: cmd/ncclrun starts `ncclrun
// probe-mlock [--ambient] SIZE` through the launcher, and that command is
// ProbeHere.

// ProbeHere is the probe's child: it pins size bytes with mlock(2) and
// releases them; the error says why the pin did not hold. With ambient it
// first raises CAP_IPC_LOCK from permitted to effective, which is what
// CMD's ambient set gives it (the probe is ncclrun itself, whose file
// capabilities, if any, replace the ambient set on exec).
func ProbeHere(size int64, ambient bool) error {
	runtime.LockOSThread() // capabilities are per thread; pin on this one
	if ambient {
		// Best effort: the probe then reports what mlock says.
		_, _ = caps.Raise(caps.IPCLock)
	}
	release, err := Pin(size)
	if err != nil {
		return err
	}
	release()
	return nil
}
