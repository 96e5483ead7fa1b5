package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ncclrun/ncclrun/internal/cmdkind"
	"github.com/ncclrun/ncclrun/preflight"
)

func TestProbeOff(t *testing.T) {
	pipe, w, err := os.Pipe()
	require.NoError(t, err)
	defer pipe.Close()
	defer w.Close()
	devs := []preflight.RDMADevice{{Name: "mlx5_0", UverbsPresent: true, Ports: []preflight.RDMAPort{{Port: 1, State: "ACTIVE"}}}}
	usable := preflight.Result{ID: preflight.IDRDMA, Status: preflight.OK, Details: map[string]any{"devices": devs}}
	gpu := preflight.Result{ID: preflight.IDGPU, Status: preflight.OK}
	on := preflight.Report{Checks: []preflight.Result{usable, gpu}, Facts: preflight.Facts{RDMA: devs}}
	base := settings{ncclDebug: "WARN"}
	with := func(mod func(*settings)) settings { s := base; mod(&s); return s }
	tests := []struct {
		name  string
		s     settings
		env   []string
		wants string // "" = on
	}{
		{"on", base, nil, ""},
		{"flag", with(func(s *settings) { s.noTransportProbe = true }), nil, "--no-transport-probe"},
		{"no watch", with(func(s *settings) { s.noWatch = true }), nil, "--no-watch"},
		{"other level", with(func(s *settings) { s.ncclDebug = "INFO" }), nil, "not WARN"},
		{"then nccllog.ProbeOff's reasons", base, []string{"NCCL_DEBUG=WARN"}, "NCCL_DEBUG is set"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			why := probeOff(tt.s, tt.env, nil, on, cmdkind.Command{Path: "python3"}, true)
			if tt.wants == "" {
				assert.Empty(t, why)
			} else {
				assert.Contains(t, why, tt.wants)
			}
		})
	}
}

// fakeNCCLScript writes like NCCL does with NCCL_DEBUG_FILE (%h the short
// host name, %p the pid), and like NCCL at WARN without it.
const fakeNCCLScript = `
h=$(hostname | cut -d. -f1)
log() { if [ -n "$NCCL_DEBUG_FILE" ]; then f=$(printf '%s' "$NCCL_DEBUG_FILE" | sed "s/%h/$h/; s/%p/$$/"); printf '%s\n' "$1" >> "$f"; else case "$1" in *" NCCL WARN "*) printf '%s\n' "$1";; esac; fi; }
echo "env NCCL_DEBUG=$NCCL_DEBUG NCCL_DEBUG_SUBSYS=$NCCL_DEBUG_SUBSYS"
log "$h:$$:$$ [0] NCCL INFO NCCL version 2.21.5+cuda12.4"
log "$h:$$:$$ [0] NCCL INFO NET/IB : No device found."
log "$h:$$:$$ [0] NCCL INFO comm 0x55 rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0"
log "$h:$$:$$ [0] NCCL INFO Using network Socket"
echo "step 1"
log "$h:$$:$$ [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.0.2<5000> failed : Connection refused"
`

// TestRunTransportProbe: on a node with GPUs and usable RDMA ports (the
// ib-node tree), at ncclrun's default WARN, run sends NCCL's INIT/NET INFO
// to a private file, diagnoses it (sockets although the ports are usable:
// degraded-transport, certain) and gives back on stdout only what NCCL
// would have printed at WARN; --no-transport-probe leaves NCCL at WARN.
func TestRunTransportProbe(t *testing.T) {
	root, err := filepath.Abs("../../preflight/testdata/ib-node")
	require.NoError(t, err)
	fakePath := fakeCommands(t, map[string]string{"fakenccl": fakeNCCLScript})
	host, _ := os.Hostname()
	host, _, _ = strings.Cut(host, ".")
	warn := " [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.0.2<5000> failed : Connection refused"

	r := invocation{args: []string{"--root", root, "run", "fakenccl"}, env: []string{fakePath}}.run(t)
	require.Equal(t, 0, r.code, "stderr: %q", r.stderr)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	require.Len(t, lines, 4, "stdout: %q", r.stdout)
	assert.Equal(t, "env NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET", lines[0])
	rest := append([]string(nil), lines[1:]...)
	sort.Strings(rest) // the given-back lines may come before or after CMD's own
	require.Equal(t, "NCCL version 2.21.5+cuda12.4", rest[0])
	require.Equal(t, "step 1", rest[1])
	assert.True(t, strings.HasPrefix(rest[2], host+":") && strings.HasSuffix(rest[2], warn), rest[2])
	assert.NotContains(t, r.stdout, "NCCL INFO", "no INFO line reaches the output")
	assert.Contains(t, r.stderr, "degraded-transport")
	assert.Contains(t, r.stderr, "mlx5_0:1", "the cause names the usable ports")

	r = invocation{args: []string{"--root", root, "--no-transport-probe", "run", "fakenccl"}, env: []string{fakePath}}.run(t)
	require.Equal(t, 0, r.code, "stderr: %q", r.stderr)
	lines = strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	require.Len(t, lines, 3, "stdout: %q", r.stdout)
	assert.Equal(t, "env NCCL_DEBUG=WARN NCCL_DEBUG_SUBSYS=", lines[0])
	assert.Equal(t, "step 1", lines[1])
	assert.NotContains(t, r.stderr, "degraded-transport", "at WARN NCCL's INFO lines are not there to read")
}

// TestRunLaunchScriptRemote: a shell script that starts Open MPI's mpirun
// on other hosts is a launcher of remote ranks for the probe as it is for
// the env forwarding: the probe stays off, so the list Open MPI forwards
// to the remote ranks names NCCL_DEBUG (WARN), never the probe's private
// NCCL_DEBUG_FILE or NCCL_DEBUG=INFO.
func TestRunLaunchScriptRemote(t *testing.T) {
	root, err := filepath.Abs("../../preflight/testdata/ib-node")
	require.NoError(t, err)
	fakePath := fakeCommands(t, map[string]string{
		"mpirun":    `echo "list=$OMPI_MCA_mca_base_env_list NCCL_DEBUG=$NCCL_DEBUG file=$NCCL_DEBUG_FILE"`,
		"ompi_info": "",
	})
	r := invocation{args: []string{"--root", root, "run", "sh", "-c", "mpirun --host a,b -np 2 python3 train.py"}, env: []string{fakePath}}.run(t)
	require.Equal(t, 0, r.code, "stderr: %q", r.stderr)
	assert.Equal(t, "list=NCCL_DEBUG NCCL_DEBUG=WARN file=\n", r.stdout)
}

// TestRunProbeWarnDuringProgressBar: CMD prints a progress bar's \r line
// and then blocks (a hang); the WARN NCCL writes meanwhile to the probe's
// file reaches ncclrun's stdout while CMD still runs, on a line of its
// own, and CMD's bytes are all there, in order.
func TestRunProbeWarnDuringProgressBar(t *testing.T) {
	root, err := filepath.Abs("../../preflight/testdata/ib-node")
	require.NoError(t, err)
	fifo := filepath.Join(t.TempDir(), "ck-release")
	require.NoError(t, unix.Mkfifo(fifo, 0o600))
	host, _ := os.Hostname()
	host, _, _ = strings.Cut(host, ".")
	warn := " [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.0.2<5000> failed : Connection refused"
	fakePath := fakeCommands(t, map[string]string{"progress": `
h=$(hostname | cut -d. -f1)
f=$(printf '%s' "$NCCL_DEBUG_FILE" | sed "s/%h/$h/; s/%p/$$/")
printf 'epoch 1: 10%%\r'
printf '\n%s\n' "$h:$$:$$` + warn + `" >> "$f"
read x < "$CK_FIFO"
echo done
`})
	cmd := exec.Command(bin, "--root", root, "run", "progress")
	cmd.Env = append(baseEnv(t), fakePath, "CK_FIFO="+fifo)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	release := sync.OnceFunc(func() {
		if f, err := os.OpenFile(fifo, os.O_RDWR, 0); err == nil { // O_RDWR: never blocks on a FIFO
			_, _ = f.WriteString("go\n")
			f.Close()
		}
	})
	t.Cleanup(func() { release(); _ = cmd.Wait() })

	var got []byte
	arrived := make(chan struct{})
	go func() {
		defer close(arrived)
		buf := make([]byte, 4096)
		for !bytes.Contains(got, []byte(warn+"\n")) {
			n, err := stdout.Read(buf)
			got = append(got, buf[:n]...)
			if err != nil {
				return
			}
		}
	}()
	select {
	case <-arrived:
	case <-time.After(5 * time.Second):
		t.Fatalf("the WARN did not reach stdout while CMD blocked (stdout so far %q, stderr %q)", got, stderr.String())
	}
	release()
	rest, err := io.ReadAll(stdout)
	require.NoError(t, err)
	require.NoError(t, cmd.Wait())
	assert.Equal(t, "epoch 1: 10%\r\n"+host+":", string(got[:len("epoch 1: 10%\r\n")+len(host)+1]))
	assert.True(t, strings.HasSuffix(string(got), warn+"\n"), "%q", got)
	assert.Equal(t, "done\n", string(rest))
}

// TestRunProbeFakeNCCL: the fake NCCL writes the probe's private file as
// NCCL does, so under the probe its INFO lines reach the matcher (sockets
// beside usable ports: degraded-transport) and not stdout, where the
// banner NCCL prints at WARN is given back.
func TestRunProbeFakeNCCL(t *testing.T) {
	root, err := filepath.Abs("../../preflight/testdata/ib-node")
	require.NoError(t, err)
	r := invocation{args: []string{"--root", root, "run", "--", bin, "fake-nccl", "--net", "socket", "--pin", "0"}}.run(t)
	require.Equal(t, 0, r.code, "stderr: %q", r.stderr)
	assert.NotContains(t, r.stdout, "NCCL INFO")
	assert.Contains(t, r.stdout, "NCCL version 2.21.5+cuda12.4\n")
	assert.Contains(t, r.stdout, "fake-nccl: all-reduce OK on 1 ranks")
	assert.Contains(t, r.stderr, "degraded-transport")
}
