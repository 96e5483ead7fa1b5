package launcher

import (
	"fmt"
	"strings"
)

// capNames are the capability names of linux/capability.h, indexed by number.
var capNames = []string{
	"CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL",
	"SETGID", "SETUID", "SETPCAP", "LINUX_IMMUTABLE", "NET_BIND_SERVICE",
	"NET_BROADCAST", "NET_ADMIN", "NET_RAW", "IPC_LOCK", "IPC_OWNER",
	"SYS_MODULE", "SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT",
	"SYS_ADMIN", "SYS_BOOT", "SYS_NICE", "SYS_RESOURCE", "SYS_TIME",
	"SYS_TTY_CONFIG", "MKNOD", "LEASE", "AUDIT_WRITE", "AUDIT_CONTROL",
	"SETFCAP", "MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG", "WAKE_ALARM",
	"BLOCK_SUSPEND", "AUDIT_READ", "PERFMON", "BPF", "CHECKPOINT_RESTORE",
}

// capIPCLock is CAP_IPC_LOCK's number.
const capIPCLock = 14

// ParseCap returns the number of a capability named like "IPC_LOCK",
// "CAP_IPC_LOCK" or "cap_ipc_lock". Errors wrap ErrCapability.
func ParseCap(name string) (int, error) {
	n := strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(name)), "CAP_")
	for i, c := range capNames {
		if c == n {
			return i, nil
		}
	}
	return 0, fmt.Errorf("%w: unknown capability %q", ErrCapability, name)
}

// CapName returns "CAP_IPC_LOCK" for 14, and "CAP_<n>" for a number this
// package has no name for.
func CapName(c int) string {
	if c >= 0 && c < len(capNames) {
		return "CAP_" + capNames[c]
	}
	return fmt.Sprintf("CAP_%d", c)
}

// parseCaps converts names to a bit mask.
func parseCaps(names []string) (uint64, error) {
	var m uint64
	for _, n := range names {
		c, err := ParseCap(n)
		if err != nil {
			return 0, err
		}
		m |= 1 << uint(c)
	}
	return m, nil
}
