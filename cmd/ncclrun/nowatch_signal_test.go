package main

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ncclrun/ncclrun/launcher"
)

// A terminating signal that came during preflight means CMD is not
// started, with --no-watch too (it was exec'd in place regardless: a
// review found it). In process: the signal is already waiting when run
// starts, and the command does not exist, so a run that went on would
// fail with 127 instead of replacing the test binary.
func TestNoWatchSignalBeforeStart(t *testing.T) {
	term := launcher.Terminating()
	for len(term) > 0 {
		<-term
	}
	runtime.LockOSThread()
	err := unix.Tgkill(os.Getpid(), unix.Gettid(), unix.SIGTERM)
	runtime.UnlockOSThread()
	require.NoError(t, err)
	for deadline := time.Now().Add(10 * time.Second); len(term) == 0 && time.Now().Before(deadline); {
		runtime.Gosched() // the signal reaches the channel through os/signal's goroutine
	}
	require.Equal(t, 1, len(term), "SIGTERM is waiting")
	var stdout, stderr bytes.Buffer
	code := run([]string{"ncclrun", "run", "--no-watch", "--quiet", "--termination-log", filepath.Join(t.TempDir(), "log"), "--", "/nonexistent/train"},
		strings.NewReader(""), &stdout, &stderr)
	assert.Equal(t, 128+int(unix.SIGTERM), code, "stderr: %s", stderr.String())
	assert.Contains(t, stderr.String(), "ncclrun: SIGTERM received before /nonexistent/train started; not starting it\n")
}
