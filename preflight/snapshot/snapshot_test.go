package snapshot

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// maxFile is where preflight cuts a proc file read to the end.
const maxFile = 4 << 20

// TestTakeBounds: a proc file is cut where preflight cuts it, the whole
// snapshot stays within its byte and entry bounds, and what was left out
// or could not be read is counted, not fatal. Contents come in the order
// preflight reads them (shm's mount tables before the network's files),
// so the fifth 4 MiB file is the network's last.
func TestTakeBounds(t *testing.T) {
	src := t.TempDir()
	big := strings.Repeat("x", maxFile+100)
	for _, p := range []string{"proc/net/fib_trie", "proc/net/route", "proc/net/if_inet6", "proc/self/mountinfo", "proc/mounts"} {
		require.NoError(t, os.MkdirAll(filepath.Join(src, filepath.Dir(p)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(src, p), []byte(big), 0o644))
	}
	// A directory where a file is expected cannot be read: counted. (The
	// tmpfs line without size= makes shm read MemTotal from it.)
	shm := "tmpfs /dev/shm tmpfs rw,nosuid 0 0\n"
	require.NoError(t, os.WriteFile(filepath.Join(src, "proc/mounts"), []byte(shm+big), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(src, "proc/meminfo"), 0o755))
	for i := 0; i < MaxEntries; i++ {
		require.NoError(t, os.MkdirAll(filepath.Join(src, "sys/class/net", "veth"+strconv.Itoa(i)), 0o755))
	}
	s := Take(context.Background(), src, nil)
	require.LessOrEqual(t, s.Bytes, int64(MaxTotal))
	require.LessOrEqual(t, s.Len(), MaxEntries+1) // + ncclrun-env
	b, ok := s.Entry("proc/self/mountinfo")
	require.True(t, ok)
	require.Len(t, b, maxFile, "cut at preflight's bound")
	require.NotEmpty(t, s.OverLimit)
	require.Contains(t, s.OverLimit, "proc/net/fib_trie", "the fifth 4 MiB file is over the 16 MiB bound")
	require.Contains(t, s.Unreadable, "proc/meminfo")
	require.NotContains(t, s.Unreadable, "proc/self/status", "a missing file is not unreadable")
}
