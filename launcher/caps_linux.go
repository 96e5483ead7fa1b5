package launcher

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/ncclrun/ncclrun/internal/caps"
)

// checkLaunchCaps checks in ncclrun, before anything is forked, what the
// kernel would otherwise refuse with an opaque EPERM.
func checkLaunchCaps(u *User, ambient bool) error {
	c, err := caps.Get()
	if err != nil {
		return err
	}
	if ambient && !caps.Has(c.Permitted, caps.IPCLock) {
		return fmt.Errorf("start with ambient CAP_IPC_LOCK: %w (CapPrm=%016x); run ncclrun as root with IPC_LOCK, or setcap cap_ipc_lock+p on the ncclrun binary", ErrNoIPCLock, c.Permitted)
	}
	if u != nil {
		const need = 1<<caps.SetUID | 1<<caps.SetGID
		same := u.UID == uint32(unix.Geteuid()) && u.GID == uint32(unix.Getegid())
		if !same && c.Effective&need != need {
			return fmt.Errorf("%w: switching to uid %d gid %d needs CAP_SETUID and CAP_SETGID, which ncclrun does not have", ErrUser, u.UID, u.GID)
		}
	}
	return nil
}

// errEPERM reports whether err is EPERM.
func errEPERM(err error) bool { return errors.Is(err, unix.EPERM) }
