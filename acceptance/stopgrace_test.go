//go:build acceptance

package acceptance

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ncclrun/ncclrun/internal/testutil"
)

// Promise: with --stop-grace a preempted torchrun job keeps its checkpoint.
// The example training script (examples/training) saves on SIGUSR1. On
// SIGTERM plain torchrun forwards SIGTERM to its workers, which die without
// saving; through `ncclrun --stop-grace` each worker's checkpoint is
// written after the SIGTERM reached ncclrun (none existed when it was
// sent) and before the workers ended, and torchrun is not killed.
func TestTorchrunStopGrace(t *testing.T) {
	tr := torchrun(t)
	script, err := filepath.Abs("../examples/training/checkpoint_on_signal.py")
	require.NoError(t, err)
	for _, via := range []bool{false, true} {
		name := map[bool]string{false: "plain torchrun", true: "ncclrun --stop-grace"}[via]
		t.Run(name, func(t *testing.T) {
			dir := shared(t)
			argv := []string{tr, "--nnodes", "1", "--rdzv_backend", "c10d", "--rdzv_endpoint", "localhost:" + freePort(),
				"--rdzv_id", "ncclrun-acceptance-" + freePort(), "--nproc_per_node", "2", script}
			if via {
				argv = append([]string{ncclrunBin, "--stop-grace", "2m", "--checkpoint-signal", "SIGUSR1", "--"}, argv...)
			}
			s := start(t, clientEnv(t, "CHECKPOINT_DIR="+dir), argv...)
			waitTraining(t, s)
			ckpts := []string{filepath.Join(dir, "rank0.pt"), filepath.Join(dir, "rank1.pt")}
			for _, c := range ckpts {
				require.NoFileExists(t, c, "no checkpoint before the SIGTERM")
			}
			require.NoError(t, s.cmd.Process.Signal(syscall.SIGTERM))
			for range s.lines {
			}
			var err error
			select {
			case err = <-s.err:
			case <-time.After(hangGuard):
				t.Fatalf("%s did not end within %v of SIGTERM", name, hangGuard)
			}
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
				if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
					code = 128 + int(ws.Signal())
				}
			}
			t.Logf("%s: exit status %d", name, code)
			for _, c := range ckpts {
				_, statErr := os.Stat(c)
				if via {
					assert.NoError(t, statErr, "the worker saved on SIGUSR1 before ncclrun forwarded SIGTERM; stderr %q", s.errb.String())
				} else {
					assert.ErrorIs(t, statErr, os.ErrNotExist, "plain torchrun's SIGTERM kills the workers before they save")
				}
			}
			if via {
				assert.NotEqual(t, 137, code, "nothing was killed")
				assert.Contains(t, s.errb.String(), "ncclrun: SIGTERM: sent SIGUSR1 to 2 training process(es) (torchrun's workers)")
			}
		})
	}
}

// rankSaves is a rank that says "training", then on SIGUSR1 writes
// rank<N> in the directory of its argument and exits.
const rankSaves = `import os, signal, sys, time
stop = []
signal.signal(signal.SIGUSR1, lambda s, f: stop.append(s))
rank = os.environ.get("OMPI_COMM_WORLD_RANK", "0")
os.write(1, f"rank {rank}: training\n".encode())
while not stop:
    time.sleep(0.05)
open(os.path.join(sys.argv[1], "rank" + rank), "w").write("saved\n")
`

// Promise: under mpirun, --stop-grace signals mpirun itself, which
// forwards SIGUSR1 to every rank (on both "nodes"): each saves before the
// SIGTERM reaches mpirun, and the job ends as its ranks do. Without
// --stop-grace mpirun's SIGTERM ends the ranks unsaved.
func TestMpirunStopGrace(t *testing.T) {
	mpirun := testutil.RequireTool(t, "mpirun")
	dir := shared(t)
	argv := append([]string{ncclrunBin, "--stop-grace", "2m", "--"}, mpirunArgs(mpirun, "/usr/bin/python3", "-c", rankSaves, dir)...)
	s := start(t, clientEnv(t), argv...)
	waitTraining(t, s)
	saved := []string{filepath.Join(dir, "rank0"), filepath.Join(dir, "rank1")}
	for _, f := range saved {
		require.NoFileExists(t, f)
	}
	require.NoError(t, s.cmd.Process.Signal(syscall.SIGTERM))
	for range s.lines {
	}
	select {
	case err := <-s.err:
		assert.NoError(t, err, "the ranks saved and exited 0, and so did mpirun; stderr %q", s.errb.String())
	case <-time.After(hangGuard):
		t.Fatalf("mpirun did not end within %v of SIGTERM", hangGuard)
	}
	for _, f := range saved {
		assert.FileExists(t, f, "the rank saved on the SIGUSR1 mpirun forwarded")
	}
}

// waitTraining reads the job's lines until both ranks printed that they
// train, and returns the lines read.
func waitTraining(t *testing.T, s *started) []string {
	t.Helper()
	var got []string
	timeout := time.After(hangGuard)
	for training := 0; training < 2; {
		select {
		case l, ok := <-s.lines:
			require.True(t, ok, "the job ended before both ranks trained: %q; stderr %q", got, s.errb.String())
			got = append(got, l)
			if strings.HasSuffix(l, ": training") {
				training++
			}
		case <-timeout:
			t.Fatalf("ranks not training within %v: %q", hangGuard, got)
		}
	}
	return got
}
