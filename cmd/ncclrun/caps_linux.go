package main

import "golang.org/x/sys/unix"

// raiseIPCLock makes CAP_IPC_LOCK effective on this thread when it is
// permitted; best effort (the probe then reports what mlock says).
func raiseIPCLock() {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if unix.Capget(&hdr, &data[0]) != nil {
		return
	}
	const bit = uint32(1) << (unix.CAP_IPC_LOCK % 32)
	d := &data[unix.CAP_IPC_LOCK/32]
	if d.Permitted&bit == 0 || d.Effective&bit != 0 {
		return
	}
	d.Effective |= bit
	_ = unix.Capset(&hdr, &data[0])
}
