package nccllog

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Promise: a terminating signal while CMD's files are read
// stops the reading at once (one warning); what was read is kept.
func TestExitFilesReadingStopsOnSignal(t *testing.T) {
	d := t.TempDir()
	f := filepath.Join(d, "nccl.log")
	require.NoError(t, os.WriteFile(f, bytes.Repeat([]byte("node-a:1:1 [0] NCCL INFO x\n"), (8<<20)/27), 0o644))
	x := ExitFiles{Pattern: f, Since: time.Now().Add(-time.Hour)}
	started := make(chan struct{})
	var n atomic.Int64
	feed := func(r io.Reader) {
		b := make([]byte, 1) // slow on purpose: one byte a read
		for {
			if _, err := r.Read(b); err != nil {
				return
			}
			if n.Add(1) == 1 {
				close(started)
			}
		}
	}
	term := make(chan os.Signal, 1)
	done := make(chan ExitReads, 1)
	go func() { done <- x.Read(feed, term) }()
	<-started
	term <- syscall.SIGTERM
	r := <-done
	require.Len(t, r.Warns, 1, "%q", r.Warns)
	assert.True(t, strings.HasPrefix(r.Warns[0], "SIGTERM received"), "%q", r.Warns)
	assert.Less(t, n.Load(), int64(8<<20), "the reading went on to the end")
}

// Promise: the torchrun error file is read whole when small, and a file
// over TorchFileMax is not parsed (one warning), the debug files still are.
func TestExitFilesTorchFileBound(t *testing.T) {
	d := t.TempDir()
	big, small := filepath.Join(d, "big.json"), filepath.Join(d, "small.json")
	require.NoError(t, os.WriteFile(small, []byte(`{"message": "boom"}`), 0o644))
	require.NoError(t, os.WriteFile(big, bytes.Repeat([]byte(" "), TorchFileMax+1), 0o644))
	since := time.Now().Add(-time.Hour)
	r := ExitFiles{TorchFile: small, Since: since}.Read(func(r io.Reader) { _, _ = io.Copy(io.Discard, r) }, nil)
	assert.Equal(t, `{"message": "boom"}`, string(r.Torch))
	assert.Empty(t, r.Warns)
	r = ExitFiles{TorchFile: big, Since: since}.Read(func(r io.Reader) { _, _ = io.Copy(io.Discard, r) }, nil)
	assert.Nil(t, r.Torch)
	require.Len(t, r.Warns, 1)
	assert.Contains(t, r.Warns[0], "over the 1024 KiB")
}
