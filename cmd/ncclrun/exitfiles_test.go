package main

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

// Promise (issue 12.9): a terminating signal while CMD's files are read
// stops the reading at once (one warning); what was read is kept.
func TestExitFilesReadingStopsOnSignal(t *testing.T) {
	d := t.TempDir()
	f := filepath.Join(d, "nccl.log")
	require.NoError(t, os.WriteFile(f, bytes.Repeat([]byte("node-a:1:1 [0] NCCL INFO x\n"), (8<<20)/27), 0o644))
	x := exitFiles{pattern: f, since: time.Now().Add(-time.Hour)}
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
	done := make(chan exitReads, 1)
	go func() { done <- x.read(feed, term) }()
	<-started
	term <- syscall.SIGTERM
	r := <-done
	require.Len(t, r.warns, 1, "%q", r.warns)
	assert.True(t, strings.HasPrefix(r.warns[0], "SIGTERM received"), "%q", r.warns)
	assert.Less(t, n.Load(), int64(8<<20), "the reading went on to the end")
}

// Promise: the torchrun error file is read whole when small, and a file
// over torchFileMax is not parsed (one warning), the debug files still are.
func TestExitFilesTorchFileBound(t *testing.T) {
	d := t.TempDir()
	big, small := filepath.Join(d, "big.json"), filepath.Join(d, "small.json")
	require.NoError(t, os.WriteFile(small, []byte(`{"message": "boom"}`), 0o644))
	require.NoError(t, os.WriteFile(big, bytes.Repeat([]byte(" "), torchFileMax+1), 0o644))
	since := time.Now().Add(-time.Hour)
	r := exitFiles{torchFile: small, since: since}.read(func(r io.Reader) { _, _ = io.Copy(io.Discard, r) }, nil)
	assert.Equal(t, `{"message": "boom"}`, string(r.torch))
	assert.Empty(t, r.warns)
	r = exitFiles{torchFile: big, since: since}.read(func(r io.Reader) { _, _ = io.Copy(io.Discard, r) }, nil)
	assert.Nil(t, r.torch)
	require.Len(t, r.warns, 1)
	assert.Contains(t, r.warns[0], "over the 1024 KiB")
}
