//go:build acceptance

// Package acceptance runs ncclrun in front of the real clients: Debian's
// torchrun (torch 1.13, gloo) and Open MPI's mpirun, each result compared
// with the plain command's. `make acceptance` runs it (build tag
// acceptance); a missing client skips, except under CI=true, where .ci/run
// has installed python3-torch, openmpi-bin and python3-mpi4py.
//
// The harness patches one bug of Debian's torch 1.13 on Python 3.11
// (testdata/sitecustomize.py on PYTHONPATH): ncclrun itself is never
// patched and never knows.
package acceptance

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ncclrun/ncclrun/internal/testutil"
)

// hangGuard bounds every client run: torchrun's own shutdown takes 30 s.
const hangGuard = 3 * time.Minute

var (
	ncclrunBin string // built by TestMain, world-readable
	harness    string // testdata copied where uid 1000 may read it
)

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "ncclrun-acceptance-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	ncclrunBin, harness = filepath.Join(dir, "ncclrun"), filepath.Join(dir, "harness")
	build := exec.Command("go", "build", "-o", ncclrunBin, "../cmd/ncclrun")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build ncclrun:", err)
		return 1
	}
	if err := os.MkdirAll(harness, 0o755); err == nil {
		es, _ := os.ReadDir("testdata")
		for _, e := range es {
			b, rerr := os.ReadFile(filepath.Join("testdata", e.Name()))
			if rerr == nil {
				err = errors.Join(err, os.WriteFile(filepath.Join(harness, e.Name()), b, 0o755))
			}
		}
	}
	if err == nil {
		err = errors.Join(os.Chmod(dir, 0o755), os.Chmod(harness, 0o755))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "harness:", err)
		return 1
	}
	return m.Run()
}

// asUser1000 puts a command in the state of a non-root container user.
var asUser1000 = []string{"setpriv", "--reuid", "1000", "--regid", "1000", "--clear-groups", "--inh-caps", "-all"}

// torchrun returns torchrun's path, skipping (failing in CI) without it.
func torchrun(t *testing.T) string {
	t.Helper()
	p := testutil.RequireTool(t, "torchrun")
	py := "python3"
	if b, err := os.ReadFile(p); err == nil && bytes.HasPrefix(b, []byte("#!")) {
		py = strings.Fields(string(b[2:bytes.IndexByte(append(b, '\n'), '\n')]))[0] // torchrun's own interpreter
	}
	if out, err := exec.Command(py, "-c", "import torch.distributed").CombinedOutput(); err != nil {
		testutil.SkipOrFail(t, "torch is not importable: %v: %s", err, out)
	}
	return p
}

// clientEnv is a small environment for the clients: the system's PATH (no
// pyenv shims), a HOME anyone may write, the harness on PYTHONPATH.
func clientEnv(t *testing.T, extra ...string) []string {
	t.Helper()
	home, err := os.MkdirTemp("", "ncclrun-acceptance-home-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(home) })
	require.NoError(t, os.Chmod(home, 0o777))
	return append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + home,
		"LANG=C", "PYTHONPATH=" + harness, "OMP_NUM_THREADS=1", "TMPDIR=" + home,
		"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"}, extra...)
}

// shared is a directory anyone may write (reports of a uid 1000 ncclrun).
func shared(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "ncclrun-acceptance-out-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(d) })
	require.NoError(t, os.Chmod(d, 0o777))
	return d
}

type result struct {
	code           int
	stdout, stderr string
}

// run runs argv (after the prefix pre) to its end and returns how it ended;
// a death by signal N is 128+N, as a shell reports it.
func run(t *testing.T, env []string, pre []string, argv ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	all := append(append([]string{}, pre...), argv...)
	c := exec.CommandContext(ctx, all[0], all[1:]...)
	c.Env = env
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	require.NoError(t, ctx.Err(), "%q hung (hang guard %v); stderr %q", all, hangGuard, errb.String())
	return result{code: exitCode(t, err), stdout: out.String(), stderr: errb.String()}
}

func exitCode(t *testing.T, err error) int {
	t.Helper()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	require.NoError(t, err)
	return 0
}

// ncclrunLines are the lines of ncclrun's own in stderr.
func ncclrunLines(stderr string) []string {
	var l []string
	for _, s := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(s, "ncclrun: ") {
			l = append(l, s)
		}
	}
	return l
}

type report struct {
	ExitCode      int     `json:"exit_code"`
	Signal        *string `json:"signal"`
	TorchrunError *struct {
		Message string `json:"message"`
	} `json:"torchrun_error"`
	Diagnoses []struct {
		ID    string   `json:"id"`
		Count int      `json:"count"`
		Hosts []string `json:"hosts"`
	} `json:"diagnoses"`
}

func readReport(t *testing.T, p string) report {
	t.Helper()
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	var r report
	require.NoError(t, json.Unmarshal(b, &r), "%s", b)
	return r
}

// Each job gets its own rendezvous port: torch 1.13's --standalone always
// uses localhost:29400, so two jobs side by side (plain and through
// ncclrun), or one started while an earlier job's agent still shuts down,
// joined the other's store and never became ready.
func torchArgs(tr, script string) []string {
	return []string{tr, "--nnodes", "1", "--rdzv_backend", "c10d", "--rdzv_endpoint", "localhost:" + freePort(),
		"--rdzv_id", "ncclrun-acceptance-" + freePort(), "--nproc_per_node", "2", filepath.Join(harness, script)}
}

// freePort returns a TCP port on the loopback that was free a moment ago.
func freePort() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(fmt.Sprintf("acceptance: no free loopback port: %v", err))
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// Promise: a healthy gloo job behaves through ncclrun as without it, as
// root and as a non-root user: same exit status, both ranks' output, and
// not one line of ncclrun's own (no RDMA device here: memlock is not judged).
func TestTorchrunHealthy(t *testing.T) {
	tr := torchrun(t)
	for name, pre := range map[string][]string{"root": nil, "uid 1000": asUser1000} {
		t.Run(name, func(t *testing.T) {
			if pre == nil {
				testutil.RequireRoot(t)
			} else {
				testutil.RequireRoot(t)
				testutil.RequireTool(t, "setpriv")
			}
			want := 0 // plain torchrun's status, run once (as root: the client is slow to start)
			if pre == nil {
				plain := run(t, clientEnv(t), pre, torchArgs(tr, "ok.py")...)
				require.Equal(t, 0, plain.code, "plain torchrun: stderr %q", plain.stderr)
				want = plain.code
			}
			rep := filepath.Join(shared(t), "report.json")
			got := run(t, clientEnv(t), pre, append([]string{ncclrunBin, "--report", rep, "--"}, torchArgs(tr, "ok.py")...)...)
			assert.Equal(t, want, got.code, "stderr %q", got.stderr)
			for _, r := range []string{"rank 0 sum 3", "rank 1 sum 3"} {
				assert.Contains(t, got.stdout, r)
			}
			assert.Empty(t, ncclrunLines(got.stderr), "a healthy run prints nothing of ncclrun's own")
			assert.Equal(t, 0, readReport(t, rep).ExitCode)
		})
	}
}

// Promise: a failing rank gives ncclrun's exit status torchrun's own, and the
// report carries torchrun's first failure under @record (without it torchrun
// writes no error file: "Decorate your entrypoint fn with @record").
func TestTorchrunFailingRank(t *testing.T) {
	tr := torchrun(t)
	for name, record := range map[string]bool{"with @record": true, "without @record": false} {
		t.Run(name, func(t *testing.T) {
			var extra []string
			if record {
				extra = []string{"RECORD=1"}
			}
			plain := run(t, clientEnv(t, extra...), nil, torchArgs(tr, "fail.py")...)
			rep := filepath.Join(shared(t), "report.json")
			got := run(t, clientEnv(t, extra...), nil, append([]string{ncclrunBin, "--report", rep, "--"}, torchArgs(tr, "fail.py")...)...)
			require.NotEqual(t, 0, plain.code)
			assert.Equal(t, plain.code, got.code, "stderr %q", got.stderr)
			assert.Contains(t, got.stderr, "rank 1 failed on purpose", "the relayed traceback")
			r := readReport(t, rep)
			assert.Equal(t, got.code, r.ExitCode)
			if record {
				require.NotNil(t, r.TorchrunError, "torchrun's error file was read")
				assert.Contains(t, r.TorchrunError.Message, "rank 1 failed on purpose")
			} else {
				assert.Nil(t, r.TorchrunError, "torchrun writes no error file for a rank without @record")
			}
		})
	}
}

// Promise: NCCL's failure lines from every rank (printed by the workers as
// NCCL prints them) give one diagnosis counting both processes, and the
// exit status stays torchrun's.
func TestTorchrunNCCLLinesFromEveryRank(t *testing.T) {
	tr := torchrun(t)
	rep := filepath.Join(shared(t), "report.json")
	got := run(t, clientEnv(t, "FAKE_NCCL=1"), nil, append([]string{ncclrunBin, "--report", rep, "--"}, torchArgs(tr, "fail.py")...)...)
	assert.Equal(t, 1, got.code, "stderr %q", got.stderr)
	r := readReport(t, rep)
	require.NotEmpty(t, r.Diagnoses, "stderr %q", got.stderr)
	assert.Equal(t, 2, r.Diagnoses[0].Count, "two ranks reported it: %+v", r.Diagnoses)
	assert.Len(t, r.Diagnoses[0].Hosts, 1)
}

// started is a client whose stdout lines the test watches.
type started struct {
	cmd   *exec.Cmd
	lines chan string
	err   chan error
	errb  *bytes.Buffer
}

func start(t *testing.T, env []string, argv ...string) *started {
	t.Helper()
	c := exec.Command(argv[0], argv[1:]...)
	c.Env = env
	out, err := c.StdoutPipe()
	require.NoError(t, err)
	s := &started{cmd: c, lines: make(chan string, 64), err: make(chan error, 1), errb: &bytes.Buffer{}}
	c.Stderr = s.errb
	require.NoError(t, c.Start())
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
		close(s.lines)
		s.err <- c.Wait()
	}()
	t.Cleanup(func() {
		if c.ProcessState == nil {
			_ = c.Process.Kill()
		}
	})
	return s
}

// waitReady waits until both ranks said "ready".
func waitReady(t *testing.T, lines <-chan string, out io.Writer) {
	t.Helper()
	seen := map[string]bool{}
	var got []string // the client's last lines, for the failure message
	timeout := time.After(hangGuard)
	for len(seen) < 2 {
		select {
		case l, ok := <-lines:
			require.True(t, ok, "the client ended before both ranks were ready; its last lines: %q", got)
			fmt.Fprintln(out, l)
			if got = append(got, l); len(got) > 20 {
				got = got[1:]
			}
			if strings.HasPrefix(l, "ready ") {
				seen[l] = true
			}
		case <-timeout:
			t.Fatalf("ranks not ready within %v; the client's last lines: %q", hangGuard, got)
		}
	}
}

// Promise: SIGTERM with workers that ignore it: torchrun sends
// them SIGTERM, waits its 30 s, SIGKILLs them and exits 1; through ncclrun
// (default --kill-after) it is not killed mid-way, and ncclrun exits as
// torchrun does. Both shut down side by side (30 s each).
func TestTorchrunSIGTERMWorkersIgnoreIt(t *testing.T) {
	tr := torchrun(t)
	rep := filepath.Join(shared(t), "report.json")
	var via *started
	var wg sync.WaitGroup
	codes := make([]int, 2)
	for i := range 2 {
		// One after the other: torch 1.13's agent picks its workers'
		// port by binding port 0 and closing it, so two torchruns that
		// start at once can pick the same one, and one job then waits
		// for ever for its ranks. The second starts once the first's
		// ranks are up (its ports are bound), during the first's 30 s.
		argv := torchArgs(tr, "wait.py") // plain torchrun, then through ncclrun
		if i == 1 {
			argv = append([]string{ncclrunBin, "--report", rep, "--"}, argv...)
		}
		s := start(t, clientEnv(t, "IGNORE_TERM=1"), argv...)
		if i == 1 {
			via = s
		}
		waitReady(t, s.lines, io.Discard)
		require.NoError(t, s.cmd.Process.Signal(syscall.SIGTERM))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range s.lines {
			}
			select {
			case err := <-s.err:
				var ee *exec.ExitError
				codes[i] = -1
				if err == nil {
					codes[i] = 0
				} else if errors.As(err, &ee) {
					codes[i] = ee.ExitCode()
					if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
						codes[i] = 128 + int(ws.Signal())
					}
				}
			case <-time.After(hangGuard):
				codes[i] = -2
			}
		}()
	}
	wg.Wait()
	require.NotEqual(t, -2, codes[0], "plain torchrun hung")
	assert.Equal(t, codes[0], codes[1], "ncclrun's status vs plain torchrun's; ncclrun's stderr %q", via.errb.String())
	assert.NotEqual(t, 137, codes[1], "ncclrun killed torchrun in the middle of its own shutdown")
	assert.Equal(t, codes[1], readReport(t, rep).ExitCode)
}

// Promise: Ctrl-C on a terminal ends a torchrun job through ncclrun as it
// ends plain torchrun: the same exit status.
func TestTorchrunCtrlCOnPTY(t *testing.T) {
	tr := torchrun(t)
	code := func(argv ...string) (int, string) {
		c := exec.Command(argv[0], argv[1:]...)
		c.Env = clientEnv(t)
		f, err := pty.Start(c)
		require.NoError(t, err)
		defer f.Close()
		lines := make(chan string, 64)
		var all bytes.Buffer
		go func() {
			r := bufio.NewReader(f)
			for {
				l, err := r.ReadString('\n')
				if l != "" {
					lines <- strings.TrimRight(l, "\r\n")
				}
				if err != nil {
					close(lines)
					return
				}
			}
		}()
		waitReady(t, lines, &all)
		_, err = f.Write([]byte{0x03}) // ^C: the terminal sends SIGINT to its foreground group
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() { done <- c.Wait() }()
		go func() {
			for l := range lines {
				all.WriteString(l + "\n")
			}
		}()
		select {
		case err := <-done:
			return exitCode(t, err), all.String()
		case <-time.After(hangGuard):
			_ = c.Process.Kill()
			t.Fatalf("%q did not end after ^C", argv)
		}
		return 0, ""
	}
	plain, _ := code(torchArgs(tr, "wait.py")...)
	got, out := code(append([]string{ncclrunBin, "--"}, torchArgs(tr, "wait.py")...)...)
	assert.NotEqual(t, 0, plain)
	assert.Equal(t, plain, got, "output through ncclrun: %q", out)
}

// Promise: as PID 1 of a PID namespace (a container's entrypoint), ncclrun
// runs a healthy torchrun job to its end, reaping what it leaves.
func TestTorchrunAsPID1(t *testing.T) {
	tr := torchrun(t)
	testutil.RequireRoot(t)
	unshare := testutil.RequireTool(t, "unshare")
	got := run(t, clientEnv(t), []string{unshare, "--pid", "--fork", "--mount-proc"}, append([]string{ncclrunBin, "--"}, torchArgs(tr, "ok.py")...)...)
	assert.Equal(t, 0, got.code, "stderr %q", got.stderr)
	assert.Contains(t, got.stdout, "rank 0 sum 3")
	assert.Contains(t, got.stdout, "rank 1 sum 3")
	assert.Empty(t, ncclrunLines(got.stderr))
}

// mpirunArgs is an Open MPI job of two "nodes" started through agent.sh, a
// remote-shell agent that, like ssh, passes no environment on.
func mpirunArgs(mpirun string, rank ...string) []string {
	return append([]string{mpirun, "--mca", "routed", "direct", "--mca", "oob_tcp_if_include", "lo",
		"--mca", "btl_tcp_if_include", "lo", "--mca", "btl", "self,tcp",
		"--mca", "plm_rsh_agent", filepath.Join(harness, "agent.sh"), "--host", "nodea,nodeb", "-np", "2", "--oversubscribe"}, rank...)
}

// Promise: the variables ncclrun adds reach ranks that mpirun starts on
// other nodes (ncclrun inserts -x NAME: Open MPI does not forward the
// environment), and mpirun's exit status passes through.
func TestMpirunForwardsAddedVariables(t *testing.T) {
	mpirun := testutil.RequireTool(t, "mpirun")
	if out, err := exec.Command("/usr/bin/python3", "-c", "import mpi4py").CombinedOutput(); err != nil {
		testutil.SkipOrFail(t, "mpi4py is not importable: %v: %s", err, out)
	}
	rank := []string{"/usr/bin/python3", filepath.Join(harness, "rank.py")}
	plain := run(t, clientEnv(t, "NCCL_DEBUG=INFO"), nil, mpirunArgs(mpirun, rank...)...)
	require.Equal(t, 0, plain.code, "plain mpirun: stderr %q", plain.stderr)
	assert.Equal(t, 2, strings.Count(plain.stdout, "NCCL_DEBUG=unset"), "the agent is not inheriting: %q", plain.stdout)

	got := run(t, clientEnv(t), nil, append([]string{ncclrunBin, "--"}, mpirunArgs(mpirun, rank...)...)...)
	assert.Equal(t, plain.code, got.code, "stderr %q", got.stderr)
	assert.Equal(t, 2, strings.Count(got.stdout, "NCCL_DEBUG=WARN"), "each remote rank got ncclrun's NCCL_DEBUG: %q", got.stdout)
	assert.Contains(t, got.stdout, "size=2")

	fail := []string{"sh", "-c", "exit 3"}
	plain = run(t, clientEnv(t), nil, mpirunArgs(mpirun, fail...)...)
	got = run(t, clientEnv(t), nil, append([]string{ncclrunBin, "--quiet", "--"}, mpirunArgs(mpirun, fail...)...)...)
	require.NotEqual(t, 0, plain.code)
	assert.Equal(t, plain.code, got.code, "a failing rank: mpirun's status passes through (stderr %q)", got.stderr)
}

// Promise: under @record, torchrun's failure summary reprints each failing
// rank's traceback; a two-rank job whose ranks both raise NCCL's error is
// two processes in the report, whatever the interleaving of the ranks'
// writes, on every run of the real job.
func TestTorchrunRecordCountsEachRankOnce(t *testing.T) {
	tr := torchrun(t)
	for i := 0; i < 3; i++ {
		rep := filepath.Join(shared(t), "report.json")
		got := run(t, clientEnv(t), nil, append([]string{ncclrunBin, "--report", rep, "--"}, torchArgs(tr, "ncclerror.py")...)...)
		require.NotEqual(t, 0, got.code, "stderr %q", got.stderr)
		r := readReport(t, rep)
		require.NotEmpty(t, r.Diagnoses, "run %d: stderr %q", i, got.stderr)
		assert.Equal(t, "socket-interface", r.Diagnoses[0].ID, "run %d", i)
		assert.Equal(t, 2, r.Diagnoses[0].Count, "run %d: stderr %q", i, got.stderr)
	}
}
