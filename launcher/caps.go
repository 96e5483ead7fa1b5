package launcher

import (
	"fmt"

	"github.com/ncclrun/ncclrun/internal/caps"
)

// capIPCLock is CAP_IPC_LOCK's number.
const capIPCLock = caps.IPCLock

// parseCaps converts Config.DropCaps names to a bit mask. Errors wrap
// ErrCapability.
func parseCaps(names []string) (uint64, error) {
	m, err := caps.Mask(names)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrCapability, err)
	}
	return m, nil
}
