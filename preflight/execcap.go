package preflight

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/ncclrun/ncclrun/internal/caps"
	"github.com/ncclrun/ncclrun/internal/pinrule"
)

// The security.capability attribute (struct vfs_cap_data, little endian):
// magic_etc, then {permitted, inheritable} for the low and high 32
// capabilities, and in revision 3 the root id of the namespace that set it.
const (
	vfsCapRevisionMask = 0xff000000
	vfsCapRevision1    = 0x01000000 // 12 bytes, 32 capabilities
	vfsCapRevision2    = 0x02000000 // 20 bytes
	vfsCapRevision3    = 0x03000000 // 24 bytes, with the root id
	vfsCapEffective    = 0x000001
)

// errVFSCap is a security.capability value the kernel refuses (its exec
// then fails with EINVAL), so nothing is claimed about it.
var errVFSCap = errors.New("malformed security.capability")

// parseVFSCap reads a security.capability value as the kernel's
// get_vfs_caps_from_disk does, for a process in the initial user
// namespace: a revision 3 value whose root id is not 0 belongs to another
// namespace's root and is ignored there (no file capability).
func parseVFSCap(b []byte) (pinrule.ExecFile, error) {
	var f pinrule.ExecFile
	if len(b) < 4 {
		return f, errVFSCap
	}
	magic := binary.LittleEndian.Uint32(b)
	size := map[uint32]int{vfsCapRevision1: 12, vfsCapRevision2: 20, vfsCapRevision3: 24}[magic&vfsCapRevisionMask]
	if size == 0 || len(b) != size {
		return f, fmt.Errorf("%w: revision %#x, %d bytes", errVFSCap, magic&vfsCapRevisionMask, len(b))
	}
	if size == 24 && binary.LittleEndian.Uint32(b[20:]) != 0 {
		return f, nil
	}
	// CAP_IPC_LOCK (14) is in the low word.
	prm, inh := binary.LittleEndian.Uint32(b[4:]), binary.LittleEndian.Uint32(b[8:])
	f.FileCap = true
	f.Effective = magic&vfsCapEffective != 0
	f.IPCLockPermitted = caps.Has(uint64(prm), capIPCLock)
	f.IPCLockInheritable = caps.Has(uint64(inh), capIPCLock)
	return f, nil
}

// binprmBuf is how much of a file the kernel reads to recognise it
// (BINPRM_BUF_SIZE), and maxInterp how many #! interpreters it follows
// (exec_binprm: a sixth is ELOOP).
const (
	binprmBuf = 256
	maxInterp = 5
)

// shebang returns the interpreter of a #! script as binfmt_script reads
// it from the file's first bytes: the first word after "#!", past spaces
// and tabs, up to a space, tab, newline or NUL.
func shebang(b []byte) (string, bool) {
	if !bytes.HasPrefix(b, []byte("#!")) {
		return "", false
	}
	b = bytes.TrimLeft(b[2:], " \t")
	if i := bytes.IndexAny(b, " \t\n\x00"); i >= 0 {
		b = b[:i]
	}
	return string(b), len(b) > 0
}
