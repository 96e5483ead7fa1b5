package launcher

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// capState is the calling thread's capability sets (capabilities are per
// thread; see docs/research/capabilities.md §1.6).
type capState struct{ eff, prm, inh uint64 }

func capGet() (capState, error) {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var d [2]unix.CapUserData
	if err := unix.Capget(&hdr, &d[0]); err != nil {
		return capState{}, fmt.Errorf("capget: %w", err)
	}
	return capState{
		eff: uint64(d[0].Effective) | uint64(d[1].Effective)<<32,
		prm: uint64(d[0].Permitted) | uint64(d[1].Permitted)<<32,
		inh: uint64(d[0].Inheritable) | uint64(d[1].Inheritable)<<32,
	}, nil
}

func capSet(c capState) error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	d := [2]unix.CapUserData{
		{Effective: uint32(c.eff), Permitted: uint32(c.prm), Inheritable: uint32(c.inh)},
		{Effective: uint32(c.eff >> 32), Permitted: uint32(c.prm >> 32), Inheritable: uint32(c.inh >> 32)},
	}
	if err := unix.Capset(&hdr, &d[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	return nil
}

// inBounding reports whether capability c is in the bounding set
// (PR_CAPBSET_READ). A number the kernel does not know is not.
func inBounding(c int) bool {
	r, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, uintptr(c), 0, 0, 0)
	return err == nil && r == 1
}

// HasPermittedIPCLock reports whether ncclrun (the calling thread) holds
// CAP_IPC_LOCK in its permitted set, the condition for AmbientIPCLock.
func HasPermittedIPCLock() bool {
	c, err := capGet()
	return err == nil && c.prm&(1<<capIPCLock) != 0
}

// checkLaunchCaps checks in ncclrun, before anything is forked, what the
// kernel would otherwise refuse with an opaque EPERM.
func checkLaunchCaps(cred *Credential, ambient bool, user string) error {
	c, err := capGet()
	if err != nil {
		return err
	}
	if ambient && c.prm&(1<<capIPCLock) == 0 {
		return fmt.Errorf("start with ambient CAP_IPC_LOCK: %w (CapPrm=%016x); run ncclrun as root with IPC_LOCK, or setcap cap_ipc_lock+p on the ncclrun binary", ErrNoIPCLock, c.prm)
	}
	if cred != nil {
		const need = 1<<unix.CAP_SETUID | 1<<unix.CAP_SETGID
		same := cred.UID == uint32(unix.Geteuid()) && cred.GID == uint32(unix.Getegid())
		if !same && c.eff&need != need {
			return fmt.Errorf("%w %q: switching to uid %d gid %d needs CAP_SETUID and CAP_SETGID, which ncclrun does not have", ErrUser, user, cred.UID, cred.GID)
		}
	}
	return nil
}

// errEPERM reports whether err is EPERM.
func errEPERM(err error) bool { return errors.Is(err, unix.EPERM) }
