package testutil

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// ipcLockP is the security.capability value `setcap cap_ipc_lock+p`
// writes: vfs_cap_data revision 2, no effective flag, permitted
// 1<<CAP_IPC_LOCK.
var ipcLockP = []byte{0, 0, 0, 2, 0, 0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}

// SetIPCLockFileCap gives path cap_ipc_lock+p, as Dockerfile.base gives
// ncclrun (setting it needs CAP_SETFCAP: root). A file system without
// extended attributes skips the test (fails it under CI=true).
func SetIPCLockFileCap(t testing.TB, path string) {
	t.Helper()
	err := unix.Setxattr(path, "security.capability", ipcLockP, 0)
	if errors.Is(err, unix.ENOTSUP) {
		SkipOrFail(t, "the file system of %s has no extended attributes: %v", path, err)
	}
	if err != nil {
		t.Fatalf("setcap cap_ipc_lock+p %s: %v", path, err)
	}
}
