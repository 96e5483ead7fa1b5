package main

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
		conf  map[string]string
		rep   preflight.Report
		path  string
		out   any
		wants string // "" = on
	}{
		{"on", base, nil, nil, on, "/usr/bin/torchrun", w, ""},
		{"flag", with(func(s *settings) { s.noTransportProbe = true }), nil, nil, on, "python3", w, "--no-transport-probe"},
		{"no watch", with(func(s *settings) { s.noWatch = true }), nil, nil, on, "python3", w, "--no-watch"},
		{"other level", with(func(s *settings) { s.ncclDebug = "INFO" }), nil, nil, on, "python3", w, "not WARN"},
		{"user's subsys", base, []string{"NCCL_DEBUG_SUBSYS=INIT"}, nil, on, "python3", w, "NCCL_DEBUG_SUBSYS is set"},
		{"user's file", base, []string{"NCCL_DEBUG_FILE=/tmp/x.%p"}, nil, on, "python3", w, "NCCL_DEBUG_FILE is set"},
		{"file in nccl.conf", base, nil, map[string]string{"NCCL_DEBUG_FILE": "/tmp/x"}, on, "python3", w, "config file"},
		{"user's NCCL_DEBUG=WARN is theirs", base, []string{"NCCL_DEBUG=WARN"}, nil, on, "python3", w, "NCCL_DEBUG is set"},
		{"NCCL_DEBUG in nccl.conf", base, nil, map[string]string{"NCCL_DEBUG": "WARN"}, on, "python3", w, "NCCL_DEBUG is set in NCCL's config file"},
		{"mpirun", base, nil, nil, on, "/usr/bin/mpirun", w, "mpirun starts ranks on other hosts"},
		{"srun", base, nil, nil, on, "srun", w, "srun starts ranks"},
		{"stdout not a file", base, nil, nil, on, "python3", &bytes.Buffer{}, "stdout"},
		{"no GPU", base, nil, nil, preflight.Report{Checks: []preflight.Result{usable}}, "python3", w, "no GPU"},
		{"no usable port", base, nil, nil, preflight.Report{Checks: []preflight.Result{gpu}}, "python3", w, "no usable RDMA port"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			why := probeOff(tt.s, tt.env, tt.conf, tt.rep, tt.path, tt.out.(interface{ Write([]byte) (int, error) }))
			if tt.wants == "" {
				assert.Empty(t, why)
			} else {
				assert.Contains(t, why, tt.wants)
			}
		})
	}
}

func TestLineGate(t *testing.T) {
	var b bytes.Buffer
	g := &lineGate{w: &b}
	g.emit([]byte("W1"))
	_, _ = g.Write([]byte("loss 0.5"))
	g.emit([]byte("W2")) // waits: CMD is inside a line
	assert.Equal(t, "W1\nloss 0.5", b.String())
	_, _ = g.Write([]byte("1\nstep"))
	assert.Equal(t, "W1\nloss 0.51\nstep", b.String(), "CMD's chunk ends inside a line: W2 still waits")
	_, _ = g.Write([]byte(" 2\n"))
	assert.Equal(t, "W1\nloss 0.51\nstep 2\nW2\n", b.String())
	_, _ = g.Write([]byte("tail"))
	g.emit([]byte("W3"))
	g.flush()
	assert.Equal(t, "W1\nloss 0.51\nstep 2\nW2\ntail\nW3\n", b.String(), "at exit a waiting line gets its own line")
}

func TestProbeReadsFilesAndGivesBackWarn(t *testing.T) {
	var out bytes.Buffer
	p, vars := newTransportProbe(&out, -1, -1)
	require.NotNil(t, p)
	require.Len(t, vars, 3)
	assert.Equal(t, "INFO", vars[0].Value)
	assert.Equal(t, "INIT,NET", vars[1].Value)
	assert.Equal(t, filepath.Join(p.dir, "nccl.%h.%p"), vars[2].Value)
	fi, err := os.Stat(p.dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), "private directory")

	var fed []string
	p.feed = func(l []byte) { fed = append(fed, string(l)) }
	f1 := filepath.Join(p.dir, "nccl.n1.101")
	require.NoError(t, os.WriteFile(f1, []byte("n1:101:101 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\nn1:101:150 [0] NCCL INFO NET/IB : No dev"), 0o600))
	p.poll(false)
	assert.Equal(t, []string{"n1:101:101 [0] NCCL INFO NCCL version 2.21.5+cuda12.4"}, fed, "a partial line waits")
	appendFile(t, f1, "ice found.\nn1:101:150 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.0.2<5000> failed : Connection refused\n")
	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(p.dir, "nccl.n1.666")))
	require.NoError(t, os.WriteFile(filepath.Join(p.dir, "other"), []byte("x NCCL WARN not ours\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(p.dir, "nccl.n1.102"), []byte("n1:102:102 [1] NCCL INFO Using network Socket"), 0o600))
	p.poll(false)
	p.finish()
	sort.Strings(fed)
	assert.Equal(t, []string{
		"n1:101:101 [0] NCCL INFO NCCL version 2.21.5+cuda12.4",
		"n1:101:150 [0] NCCL INFO NET/IB : No device found.",
		"n1:101:150 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.0.2<5000> failed : Connection refused",
		"n1:102:102 [1] NCCL INFO Using network Socket",
	}, fed, "every line of NCCL's files, the last one without its newline too; no link, no other file")
	assert.Equal(t, "NCCL version 2.21.5+cuda12.4\n"+
		"n1:101:150 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.0.2<5000> failed : Connection refused\n",
		out.String(), "what NCCL prints at WARN: the version banner and the WARN lines")
	_, err = os.Stat(p.dir)
	assert.True(t, os.IsNotExist(err), "finish removes the directory")
}

func appendFile(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(s)
	require.NoError(t, err)
	require.NoError(t, f.Close())
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

// TestProbeFollowerAndFinish: the follower goroutine and finish hand every
// line over once, whatever the timing (run with -race).
func TestProbeFollowerAndFinish(t *testing.T) {
	var out bytes.Buffer
	p, _ := newTransportProbe(&out, -1, -1)
	require.NotNil(t, p)
	var mu sync.Mutex
	n := 0
	p.start(func([]byte) { mu.Lock(); n++; mu.Unlock() })
	f := filepath.Join(p.dir, "nccl.n1.7")
	require.NoError(t, os.WriteFile(f, nil, 0o600))
	for i := 0; i < 200; i++ {
		appendFile(t, f, "n1:7:7 [0] NCCL INFO line\n")
	}
	appendFile(t, f, "n1:7:7 [0] x.cc:1 NCCL WARN last")
	p.finish()
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, 201, n)
	assert.Equal(t, "n1:7:7 [0] x.cc:1 NCCL WARN last\n", out.String())
}
