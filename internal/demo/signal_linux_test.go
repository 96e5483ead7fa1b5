//go:build linux

package demo

import (
	"bufio"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestInterruptRemovesTempDir: Ctrl-C (SIGINT to the terminal's process
// group, the demo and its run alike) while a run is in progress ends the
// demo with 130 once that run has ended, its temporary directory (the
// reports, the copy of ncclrun) removed.
func TestInterruptRemovesTempDir(t *testing.T) {
	self, err := os.Executable()
	require.NoError(t, err)
	tmp := t.TempDir()
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), demoEnv+"=1", fakeEnv+"=block", "TMPDIR="+tmp)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	r := bufio.NewReader(out)
	for {
		line, err := r.ReadString('\n')
		require.NoError(t, err, "the run never started")
		if strings.TrimSpace(line) == "fake started" {
			break
		}
	}
	ents, err := os.ReadDir(tmp)
	require.NoError(t, err)
	require.Len(t, ents, 1, "the demo's directory exists while it runs")
	require.NoError(t, unix.Kill(-cmd.Process.Pid, unix.SIGINT))
	_, _ = io.Copy(io.Discard, r)
	err = cmd.Wait()
	var ee *exec.ExitError
	require.True(t, errors.As(err, &ee), "%v", err)
	assert.Equal(t, 130, ee.ExitCode(), "%v", err)
	ents, err = os.ReadDir(tmp)
	require.NoError(t, err)
	assert.Empty(t, ents, "the demo's temporary directory is removed")
}
