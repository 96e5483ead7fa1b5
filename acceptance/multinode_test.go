//go:build acceptance

package acceptance

// The multi-node suite: several hosts on this machine, each a network
// namespace with its own hostname (a UTS namespace), /etc/hosts and an
// address in 198.18.0.0/24 (the benchmark range, RFC 2544), joined by a
// bridge that lives in a namespace of its own, so nothing is added to the
// machine's own network. Each node's entrypoint is PID 1 of a PID
// namespace: torchrun (c10d rendezvous across the nodes, gloo) or mpirun,
// plain or behind ncclrun, and the two are compared. mpirun starts its
// ranks on the other nodes through testdata/netns-agent.sh, which enters
// their namespaces as ssh would reach another machine.
//
// `make multinode` runs these tests alone; `make acceptance` runs them
// with the rest. Without root, ip(8) or namespaces they skip, and under
// CI=true they fail.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ncclrun/ncclrun/internal/testutil"
)

// nsPrefix starts the name of every namespace the suite creates; the
// creating process's pid follows, so a later run removes what a killed
// run left behind.
const nsPrefix = "ncclrun-mn-"

// cluster is a set of nodes joined by a bridge.
type cluster struct {
	t     *testing.T
	name  string   // namespace names: name-sw (the bridge), name-0, name-1, ...
	dir   string   // hosts, HOST.netns (for the agent), one TMPDIR per node
	hosts []string // node0, node1, ...
}

var clusterSeq struct {
	sync.Mutex
	n int
}

// addr is node i's address.
func addr(i int) string { return fmt.Sprintf("198.18.0.%d", i+1) }

// newCluster makes n nodes, removed with every process in them when the
// test ends, whatever its outcome.
func newCluster(t *testing.T, n int) *cluster {
	t.Helper()
	testutil.RequireRoot(t)
	for _, tool := range []string{"ip", "unshare", "mount", "hostname"} {
		testutil.RequireTool(t, tool)
	}
	testutil.RemoveStaleNetns(t, nsPrefix)
	clusterSeq.Lock()
	clusterSeq.n++
	seq := clusterSeq.n
	clusterSeq.Unlock()
	c := &cluster{t: t, name: fmt.Sprintf("%s%d-%d", nsPrefix, os.Getpid(), seq), dir: t.TempDir()}
	require.NoError(t, os.Chmod(c.dir, 0o755))
	hosts := "127.0.0.1 localhost\n"
	for i := range n {
		c.hosts = append(c.hosts, fmt.Sprintf("node%d", i))
		hosts += addr(i) + " " + c.hosts[i] + "\n"
	}
	require.NoError(t, os.WriteFile(filepath.Join(c.dir, "hosts"), []byte(hosts), 0o644))
	t.Cleanup(c.remove)
	sw := c.name + "-sw"
	steps := [][]string{{"netns", "add", sw}, {"-n", sw, "link", "add", "br0", "type", "bridge"},
		{"-n", sw, "link", "set", "br0", "up"}}
	for i := range n {
		ns, veth := c.ns(i), fmt.Sprintf("v%d", i)
		require.NoError(t, os.WriteFile(filepath.Join(c.dir, c.hosts[i]+".netns"), []byte(ns), 0o644))
		require.NoError(t, os.MkdirAll(filepath.Join(c.dir, c.hosts[i], "tmp"), 0o1777))
		steps = append(steps, []string{"netns", "add", ns},
			[]string{"link", "add", "eth0", "netns", ns, "type", "veth", "peer", "name", veth, "netns", sw},
			[]string{"-n", sw, "link", "set", veth, "master", "br0", "up"},
			[]string{"-n", ns, "addr", "add", addr(i) + "/24", "dev", "eth0"},
			[]string{"-n", ns, "link", "set", "eth0", "up"},
			[]string{"-n", ns, "link", "set", "lo", "up"})
	}
	for _, s := range steps {
		if out, err := exec.Command("ip", s...).CombinedOutput(); err != nil {
			testutil.SkipOrFail(t, "network namespaces cannot be had: ip %s: %v: %s", strings.Join(s, " "), err, out)
		}
	}
	return c
}

func (c *cluster) ns(i int) string { return fmt.Sprintf("%s-%d", c.name, i) }

// remove kills every process in the cluster's namespaces and deletes them
// (the veth pairs and the bridge go with them).
func (c *cluster) remove() {
	testutil.RemoveNetns(func(ns string) bool { return strings.HasPrefix(ns, c.name+"-") }) // the switch, c.name-sw, too
}

// link sets node i's link at the bridge down (a partition) or up again.
func (c *cluster) link(i int, state string) error {
	out, err := exec.Command("ip", "-n", c.name+"-sw", "link", "set", fmt.Sprintf("v%d", i), state).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip link set v%d %s: %w: %s", i, state, err, out)
	}
	return nil
}

// nodeEnv is node i's environment: clientEnv's, a TMPDIR of its own, the
// Gloo interface, and MN_DIR for the agent.
func (c *cluster) nodeEnv(i int, extra ...string) []string {
	tmp := filepath.Join(c.dir, c.hosts[i], "tmp")
	env := clientEnv(c.t)
	for j, kv := range env {
		if strings.HasPrefix(kv, "TMPDIR=") {
			env[j] = "TMPDIR=" + tmp
		}
	}
	return append(env, append([]string{"GLOO_SOCKET_IFNAME=eth0", "MN_DIR=" + c.dir}, extra...)...)
}

// proc is a node's entrypoint, running.
type proc struct {
	host          string
	cmd           *exec.Cmd
	stdout        *readyWriter
	stderr        *readyWriter
	done          chan struct{} // closed when it ended; code and took are then set
	code          int
	took          time.Duration // from the start to the end
	report, trmlg string        // ncclrun's --report and --termination-log ("" when plain)
}

// start starts argv as PID 1 of a new PID namespace on node i.
func (c *cluster) start(i int, env []string, argv ...string) *proc {
	c.t.Helper()
	all := append([]string{"ip", "netns", "exec", c.ns(i), "unshare", "--uts", "--mount", "--pid", "--fork",
		"--mount-proc", "--kill-child", filepath.Join(harness, "node-init.sh"), c.hosts[i], filepath.Join(c.dir, "hosts")}, argv...)
	cmd := exec.Command(all[0], all[1:]...)
	cmd.Env = env
	p := &proc{host: c.hosts[i], cmd: cmd, stdout: newReadyWriter(), stderr: newReadyWriter(), done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	cmd.WaitDelay = 10 * time.Second // a process left holding the output does not hang the suite
	// The node dies with the test: unshare is killed with its parent, and
	// its --kill-child takes the node's PID 1, and so every process of
	// the node, with it.
	//
	// The node is a session of its own, as a container's init is (runc
	// calls setsid) and as a real node shares none with another: with
	// the kernel's autogroup (sched_autogroup_enabled, tasks of the root
	// CPU cgroup) CPU time is shared between sessions first, so nodes
	// left in the test's session shared one share among all of them (and
	// with go test), while ncclrun's CMD, which leads a session of its
	// own, had one to itself: plain torchrun started its workers several
	// times slower than through ncclrun on a loaded machine.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setsid: true}
	require.NoError(c.t, cmd.Start())
	begun := time.Now()
	go func() {
		err := cmd.Wait()
		p.took = time.Since(begun)
		p.code = -1
		var ee *exec.ExitError
		switch {
		case err == nil:
			p.code = 0
		case errors.As(err, &ee):
			p.code = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				p.code = 128 + int(ws.Signal())
			}
		}
		close(p.done)
	}()
	c.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	return p
}

// pid1 is the host's pid of the node's PID 1 (unshare's child).
func (p *proc) pid1() (int, error) {
	pid := p.cmd.Process.Pid
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) != 1 {
		return 0, fmt.Errorf("%s: unshare's children are %q", p.host, f)
	}
	return strconv.Atoi(f[0])
}

// kill sends sig to the node's PID 1.
func (p *proc) kill(sig syscall.Signal) error {
	pid, err := p.pid1()
	if err != nil {
		return err
	}
	return syscall.Kill(pid, sig)
}

// wait waits for the node's entrypoint to end (hangGuard at most).
func (p *proc) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(hangGuard):
		t.Fatalf("%s did not end within %v; stderr:\n%s", p.host, hangGuard, p.stderr)
	}
	return 0
}

func (p *proc) String() string {
	return fmt.Sprintf("%s (exit %d)\n--- stdout\n%s--- stderr\n%s", p.host, p.code, p.stdout, p.stderr)
}

// readyWriter keeps what is written and tells when a line holding a
// string was written n times.
type readyWriter struct {
	mu     sync.Mutex
	b      bytes.Buffer
	notify chan struct{}
}

func newReadyWriter() *readyWriter { return &readyWriter{notify: make(chan struct{}, 1)} }

func (w *readyWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case w.notify <- struct{}{}:
	default:
	}
	return w.b.Write(p)
}

func (w *readyWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// await waits until s was written n times; it fails when done closes
// first or hangGuard passes.
func (w *readyWriter) await(s string, n int, done <-chan struct{}) error {
	timeout := time.After(hangGuard)
	for strings.Count(w.String(), s) < n {
		select {
		case <-w.notify:
		case <-done:
			if strings.Count(w.String(), s) >= n {
				return nil
			}
			return fmt.Errorf("ended before %q was written %d times:\n%s", s, n, w.String())
		case <-timeout:
			return fmt.Errorf("%q not written %d times within %v:\n%s", s, n, hangGuard, w.String())
		}
	}
	return nil
}

// job is one torchrun job over a cluster: one proc per node.
type job []*proc

// torchJob starts torchrun (tr) on every node of c (through ncclrun when
// via), each node with env(i) added to its environment.
func torchJob(t *testing.T, c *cluster, tr string, via bool, nproc int, script string, env func(i int) []string) job {
	t.Helper()
	var j job
	for i := range c.hosts {
		var extra []string
		if env != nil {
			extra = env(i)
		}
		// torchrun's agent looks at its workers every second, unless the
		// job's environment says MONITOR_INTERVAL (the harness's own
		// variable).
		monitor := "1"
		for _, kv := range extra {
			if v, ok := strings.CutPrefix(kv, "MONITOR_INTERVAL="); ok {
				monitor = v
			}
		}
		argv := []string{tr, "--nnodes", strconv.Itoa(len(c.hosts)), "--nproc_per_node", strconv.Itoa(nproc),
			"--rdzv_backend", "c10d", "--rdzv_endpoint", addr(0) + ":29400", "--rdzv_id", "mn",
			"--monitor_interval", monitor, filepath.Join(harness, script)}
		var rep, trm string
		if via {
			out := shared(t)
			rep, trm = filepath.Join(out, "report.json"), filepath.Join(out, "termination-log")
			argv = append([]string{ncclrunBin, "--report", rep, "--termination-log", trm, "--"}, argv...)
		}
		p := c.start(i, c.nodeEnv(i, extra...), argv...)
		p.report, p.trmlg = rep, trm
		j = append(j, p)
	}
	return j
}

// codes waits for every node and returns their exit statuses.
func (j job) codes(t *testing.T) []int {
	t.Helper()
	var cs []int
	for _, p := range j {
		cs = append(cs, p.wait(t))
	}
	return cs
}

func (j job) String() string {
	var b strings.Builder
	for _, p := range j {
		b.WriteString(p.String())
	}
	return b.String()
}

// slack is how much longer than plain a node may take through ncclrun,
// or shorter.
const slack = 15 * time.Second

// near asserts that a node took about as long through ncclrun as plain:
// within tol either way. Faster is a difference too (a shutdown path of
// ncclrun's own, or a harness that does not treat both alike).
func near(t *testing.T, plain, via *proc, tol time.Duration) bool {
	t.Helper()
	d := via.took - plain.took
	return assert.True(t, d > -tol && d < tol, "%s took %v through ncclrun, %v plain: %v apart, more than %v",
		via.host, via.took, plain.took, d, tol)
}

// pair runs the same job plain and through ncclrun, side by side on two
// clusters, and returns both once act (nil: none) has been done to each
// and every node ended.
func pair(t *testing.T, nodes, nproc int, script string, env func(i int) []string, act func(c *cluster, j job) error) (plain, via job) {
	t.Helper()
	cp, cv := newCluster(t, nodes), newCluster(t, nodes)
	// torch's import check (seconds of CPU) before either job, not
	// between them: the job started second would start later, beside the
	// first job's start.
	tr := torchrun(t)
	plain = torchJob(t, cp, tr, false, nproc, script, env)
	via = torchJob(t, cv, tr, true, nproc, script, env)
	if act != nil {
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for k, x := range []struct {
			c *cluster
			j job
		}{{cp, plain}, {cv, via}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[k] = act(x.c, x.j)
			}()
		}
		wg.Wait()
		require.NoError(t, errs[0], "plain")
		require.NoError(t, errs[1], "through ncclrun")
	}
	pc, vc := plain.codes(t), via.codes(t)
	saveFixture(t, via)
	assert.Equal(t, pc, vc, "exit status of every node, plain vs through ncclrun:\nplain:\n%s\nthrough ncclrun:\n%s", plain, via)
	for i := range via {
		// Side by side on a shared machine the two differ by seconds;
		// a shutdown of ncclrun's own (a --kill-after of 30 s) would show.
		near(t, plain[i], via[i], slack)
	}
	return plain, via
}

// mnReport is what the suite reads of ncclrun's --report.
type mnReport struct {
	ExitCode      int `json:"exit_code"`
	TorchrunError *struct {
		Message string `json:"message"`
	} `json:"torchrun_error"`
	Diagnoses []mnDiagnosis `json:"diagnoses"`
}

type mnDiagnosis struct {
	ID           string   `json:"id"`
	Title        string   `json:"title"`
	Hosts        []string `json:"hosts"`
	FirstLine    string   `json:"first_line"`
	Cause        string   `json:"cause"`
	KnockOnOf    string   `json:"knock_on_of"`
	FirstFailure *struct {
		Host string `json:"host"`
		Rank *int   `json:"rank"`
	} `json:"first_failure"`
}

func (p *proc) readReport(t *testing.T) mnReport {
	t.Helper()
	b, err := os.ReadFile(p.report)
	require.NoError(t, err, "%s wrote no report", p.host)
	var r mnReport
	require.NoError(t, json.Unmarshal(b, &r), "%s", b)
	return r
}

func (p *proc) termination(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(p.trmlg)
	require.NoError(t, err, "%s wrote no termination message", p.host)
	return string(b)
}

func (r mnReport) ids() []string {
	var ids []string
	for _, d := range r.Diagnoses {
		ids = append(ids, d.ID)
	}
	return ids
}

func (r mnReport) find(id string) *mnDiagnosis {
	for i := range r.Diagnoses {
		if r.Diagnoses[i].ID == id {
			return &r.Diagnoses[i]
		}
	}
	return nil
}

// fixtureDir, when set (MULTINODE_FIXTURES=dir), receives each node's
// output through ncclrun as TestName.HOST.log: the real lines the
// diagnosis tests are built from (diagnosis/testdata/multinode).
func saveFixture(t *testing.T, j job) {
	dir := os.Getenv("MULTINODE_FIXTURES")
	if dir == "" {
		return
	}
	for _, p := range j {
		name := strings.ReplaceAll(t.Name(), "/", "_") + "." + p.host + ".log"
		_ = os.WriteFile(filepath.Join(dir, name), []byte(p.stdout.String()+p.stderr.String()), 0o644)
	}
}

// Promise: a healthy two-node torchrun job ends through ncclrun as without
// it on every node, every rank's output relayed, and not one line of
// ncclrun's own on any node.
func TestMultinodeTorchrunHealthy(t *testing.T) {
	_, via := pair(t, 2, 2, "mn.py", nil, nil)
	for _, p := range via {
		assert.Equal(t, 0, p.code, "%s", p)
		assert.Empty(t, ncclrunLines(p.stderr.String()), "a healthy job prints nothing of ncclrun's own: %s", p)
		assert.Equal(t, 0, p.readReport(t).ExitCode)
	}
	out := via[0].stdout.String() + via[1].stdout.String()
	for r := range 4 {
		assert.Contains(t, out, fmt.Sprintf("rank %d sum 10", r))
	}
}

// Promise (of the harness): every node is a session of its own, apart
// from the test's and from every other node's, plain or through ncclrun,
// so that the kernel's autogroup gives plain torchrun the CPU share
// ncclrun's CMD (a session leader) gets: timing plain against through
// ncclrun compares like with like.
func TestMultinodeNodesAreSessions(t *testing.T) {
	c := newCluster(t, 2)
	own, err := unix.Getsid(0)
	require.NoError(t, err)
	sids := map[int]string{own: "the test"}
	for i := range c.hosts {
		p := c.start(i, c.nodeEnv(i), "sleep", "60")
		var pid int
		require.Eventually(t, func() bool { pid, err = p.pid1(); return err == nil }, 10*time.Second, 10*time.Millisecond)
		sid, err := unix.Getsid(pid)
		require.NoError(t, err)
		if other, ok := sids[sid]; ok {
			assert.Fail(t, "a node shares a session", "%s's PID 1 (%d) is in the session of %s", p.host, pid, other)
			continue
		}
		sids[sid] = p.host
	}
}

// readyAll waits until each node's nproc ranks said "ready".
func readyAll(j job, nproc int) error {
	for _, p := range j {
		if err := p.stdout.await("ready ", nproc, p.done); err != nil {
			return fmt.Errorf("%s: %w", p.host, err)
		}
	}
	return nil
}

// loopEnv is the environment of a job whose ranks all_reduce until a peer
// is gone, a collective giving up after 12 s.
func loopEnv(int) []string { return []string{"MODE=loop", "GLOO_TIMEOUT=12"} }

// mentionsPeer reports whether s names node i by host name or address.
func mentionsPeer(s string, i int) bool {
	return strings.Contains(s, fmt.Sprintf("node%d", i)) || strings.Contains(s, addr(i))
}

// Promise: SIGTERM to one node's PID 1 (its ncclrun) ends both nodes as it
// ends plain torchrun's job: the same exit status on every node.
func TestMultinodeTorchrunSIGTERM(t *testing.T) {
	_, via := pair(t, 2, 1, "mn.py", loopEnv, func(c *cluster, j job) error {
		if err := readyAll(j, 1); err != nil {
			return err
		}
		return j[0].kill(syscall.SIGTERM)
	})
	assert.NotEqual(t, 0, via[0].code)
}

// Promise: a node crashes (every process on it killed at once, here the
// node hosting the rendezvous store): the survivor's ncclrun exits as plain
// torchrun does and names a lost peer (peer-lost) with the peer's address
// or host, never a cause of its own, and its termination message says so.
func TestMultinodeTorchrunNodeCrash(t *testing.T) {
	_, via := pair(t, 2, 1, "mn.py", loopEnv, func(c *cluster, j job) error {
		if err := readyAll(j, 1); err != nil {
			return err
		}
		return j[0].kill(syscall.SIGKILL)
	})
	s := via[1]
	r := s.readReport(t)
	require.NotEmpty(t, r.Diagnoses, "the survivor reports no diagnosis: %s", s)
	assert.Equal(t, "peer-lost", r.Diagnoses[0].ID, "the survivor's first diagnosis: %v\n%s", r.ids(), s)
	if d := r.find("peer-lost"); d != nil && mentionsPeer(s.stderr.String(), 0) {
		assert.True(t, mentionsPeer(d.FirstLine+d.Cause+strings.Join(d.Hosts, " "), 0), "peer-lost names the peer the output shows: %+v", d)
	}
	for _, id := range r.ids() {
		assert.NotContains(t, []string{"memlock", "shm", "rdma-device", "socket-interface", "memory-registration", "nccl-error"}, id,
			"a local cause for a lost peer")
	}
	assert.Contains(t, strings.ToLower(s.termination(t)), "peer", "the termination message names the lost peer")
}

// Promise: a partition (the link of the node hosting the store cut until
// the survivor's workers gave up): the survivor says what its workers hit.
func TestMultinodeTorchrunPartition(t *testing.T) {
	_, via := pair(t, 2, 1, "mn.py", loopEnv, func(c *cluster, j job) error {
		if err := readyAll(j, 1); err != nil {
			return err
		}
		if err := c.link(0, "down"); err != nil {
			return err
		}
		err := j[1].stderr.await("Traceback", 1, j[1].done)
		// Healed, the agents' exit barrier ends instead of waiting 300 s.
		return errors.Join(err, c.link(0, "up"))
	})
	s := via[1]
	lines := strings.Join(ncclrunLines(s.stderr.String()), "\n")
	require.NotEmpty(t, lines, "the survivor's ncclrun said nothing: %s", s)
	assert.Regexp(t, `(?i)time[ds]? ?out|peer`, lines, "the survivor names the timeout or the lost peer")
	assert.NotEmpty(t, s.readReport(t).Diagnoses)
}

// Promise: a wrong interface on one node (GLOO_SOCKET_IFNAME naming one it
// lacks): that node's preflight says so, its diagnosis is titled as
// Gloo's (no NCCL ran), and the other node, whose workers died of a store
// timeout waiting for it, names that timeout (and the peer it waited for
// when its output shows it), no local cause.
func TestMultinodeTorchrunWrongInterface(t *testing.T) {
	_, via := pair(t, 2, 1, "mn.py", func(i int) []string {
		if i == 1 {
			return []string{"GLOO_SOCKET_IFNAME=eth9", "INIT_TIMEOUT=10"}
		}
		return []string{"INIT_TIMEOUT=10"}
	}, nil)
	bad, other := via[1], via[0]
	assert.Contains(t, bad.stderr.String(), `GLOO_SOCKET_IFNAME="eth9"`, "preflight of the node with the wrong interface")
	r := bad.readReport(t)
	require.NotEmpty(t, r.Diagnoses, "%s", bad)
	for _, d := range r.Diagnoses {
		assert.NotContains(t, d.Title, "NCCL", "a Gloo-only job's diagnosis titled as NCCL's: %+v", d)
	}
	assert.Contains(t, r.Diagnoses[0].Title, "Gloo", "%+v", r.Diagnoses[0])
	// The node that waited: its worker's output shows only `Socket
	// Timeout` at the store, neither the peer's host, address nor rank
	// (torch prints none of them), so ncclrun names the store timeout
	// for what it is and no local cause; it names the peer only when the
	// output does (docs/diagnosis.md).
	said := strings.Join(ncclrunLines(other.stderr.String()), "\n")
	ro := other.readReport(t)
	require.NotEmpty(t, ro.Diagnoses, "the node that waited reports no diagnosis: %s", other)
	assert.Equal(t, "collective-timeout", ro.Diagnoses[0].ID, "%v\n%s", ro.ids(), other)
	assert.Contains(t, ro.Diagnoses[0].Title, "store", "%+v", ro.Diagnoses[0])
	for _, d := range ro.Diagnoses {
		assert.NotContains(t, d.Title, "NCCL", "a Gloo-only job's diagnosis titled as NCCL's: %+v", d)
		assert.NotContains(t, []string{"socket-interface", "memlock", "shm", "rdma-device", "nccl-error"}, d.ID, "a local cause for a peer's lateness")
	}
	if mentionsPeer(other.stdout.String()+other.stderr.String(), 1) {
		assert.True(t, mentionsPeer(said, 1), "the node that waited names the peer its output shows: %s", other)
	}
}

// Promise: a Python exception in one rank (local rank 1 of node1; local
// rank 0's lost connection is printed within the same second, which torch
// 1.13 picks as the first failure): ncclrun on that node names the
// exception as the first failure, in the report and the termination
// message, and the sibling's lost connection as its knock-on; the other
// node names a lost peer.
func TestMultinodeTorchrunException(t *testing.T) {
	_, via := pair(t, 2, 2, "mn.py", func(int) []string {
		return []string{"MODE=raise", "RAISE_RANK=3", "GLOO_TIMEOUT=20"}
	}, nil)
	n1 := via[1]
	r := n1.readReport(t)
	require.NotNil(t, r.TorchrunError, "%s", n1)
	assert.Contains(t, r.TorchrunError.Message, "rank 3 failed on purpose", "the first failure is the exception")
	term := n1.termination(t)
	assert.Contains(t, term, "rank 3 failed on purpose", "the termination message names the exception")
	if d := r.find("peer-lost"); d != nil {
		assert.NotEmpty(t, d.KnockOnOf, "the sibling's lost connection is a knock-on: %+v", d)
	}
	r0 := via[0].readReport(t)
	assert.Contains(t, r0.ids(), "peer-lost", "%s", via[0])
}

// mpirunArgv is an Open MPI job of one rank on each node of c (rank i on
// node i), its remote ranks started through netns-agent.sh.
func mpirunArgv(t *testing.T, c *cluster, rank ...string) []string {
	t.Helper()
	mpirun := testutil.RequireTool(t, "mpirun")
	if out, err := exec.Command("/usr/bin/python3", "-c", "import mpi4py").CombinedOutput(); err != nil {
		testutil.SkipOrFail(t, "mpi4py is not importable: %v: %s", err, out)
	}
	return append([]string{mpirun, "--mca", "plm_rsh_agent", filepath.Join(harness, "netns-agent.sh"),
		"--mca", "oob_tcp_if_include", "eth0", "--mca", "btl_tcp_if_include", "eth0", "--mca", "btl", "self,tcp",
		"--host", strings.Join(c.hosts, ","), "--map-by", "node", "-np", strconv.Itoa(len(c.hosts))}, rank...)
}

// mpiPair runs an mpirun job from node0 plain and through ncclrun, side by
// side on two-node clusters; wrap puts mpirun behind `sh -c 'exec ...'`,
// as a launch script does.
func mpiPair(t *testing.T, wrap bool, env []string, rank ...string) (plain, via *proc) {
	t.Helper()
	var ps []*proc
	for k := range 2 {
		c := newCluster(t, 2)
		argv := mpirunArgv(t, c, rank...)
		if wrap {
			script := "exec"
			for _, a := range argv {
				script += " '" + strings.ReplaceAll(a, "'", `'\''`) + "'"
			}
			argv = []string{"sh", "-c", script}
		}
		var rep, trm string
		if k == 1 {
			out := shared(t)
			rep, trm = filepath.Join(out, "report.json"), filepath.Join(out, "termination-log")
			argv = append([]string{ncclrunBin, "--report", rep, "--termination-log", trm, "--"}, argv...)
		}
		p := c.start(0, c.nodeEnv(0, env...), argv...)
		p.report, p.trmlg = rep, trm
		ps = append(ps, p)
	}
	ps[0].wait(t)
	ps[1].wait(t)
	saveFixture(t, job{ps[1]})
	assert.Less(t, ps[1].took, ps[0].took+slack, "mpirun took %v through ncclrun, %v plain", ps[1].took, ps[0].took)
	assert.Equal(t, ps[0].code, ps[1].code, "mpirun's exit status, plain vs through ncclrun:\nplain:\n%s\nthrough ncclrun:\n%s", ps[0], ps[1])
	return ps[0], ps[1]
}

// Promise: the variables ncclrun adds reach the ranks mpirun starts on
// another node, whether ncclrun starts mpirun itself (it adds -x) or a
// launch script does (Open MPI's OMPI_MCA_mca_base_env_list, which ncclrun
// sets); a script whose mpirun passes -x (Open MPI refuses -x beside that
// list) runs as without ncclrun. A healthy job prints nothing of ncclrun's
// own.
func TestMultinodeMpirunForwardsAddedVariables(t *testing.T) {
	rank := []string{"/usr/bin/python3", filepath.Join(harness, "mnrank.py")}
	for _, tt := range []struct {
		name       string
		wrap       bool
		rank       []string
		remoteSees string
	}{
		{"mpirun", false, rank, "WARN"},
		{"sh -c 'exec mpirun ...'", true, rank, "WARN"},
		{"sh -c 'exec mpirun -x ...'", true, append([]string{"-x", "OMP_NUM_THREADS"}, rank...), "unset"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			plain, via := mpiPair(t, tt.wrap, nil, tt.rank...)
			require.Equal(t, 0, plain.code, "%s", plain)
			assert.Contains(t, plain.stdout.String(), "rank=1 size=2 host=node1 NCCL_DEBUG=unset", "the agent passes no environment on")
			assert.Contains(t, via.stdout.String(), "rank=0 size=2 host=node0 NCCL_DEBUG=WARN")
			assert.Contains(t, via.stdout.String(), "rank=1 size=2 host=node1 NCCL_DEBUG="+tt.remoteSees, "the remote rank's NCCL_DEBUG")
			assert.Empty(t, ncclrunLines(via.stderr.String()), "a healthy job prints nothing of ncclrun's own: %s", via)
		})
	}
}

// Promise: NCCL's failure lines printed by a rank on another node (a real
// registration failure under a 64 KiB memlock limit, printed by ncclrun's
// fake-nccl at the NCCL_DEBUG ncclrun forwarded) reach the diagnosis of
// the ncclrun in front of mpirun with that rank's host, not its own.
func TestMultinodeMpirunRemoteNCCLWarn(t *testing.T) {
	testutil.RequireTool(t, "setpriv")
	testutil.RequireTool(t, "prlimit")
	script := `if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then exec setpriv --reuid 1000 --regid 1000 --clear-groups --inh-caps -all prlimit --memlock=65536 "$0" fake-nccl; fi`
	plain, via := mpiPair(t, false, nil, "sh", "-c", script, ncclrunBin)
	assert.NotEqual(t, 0, plain.code)
	require.Contains(t, via.stdout.String()+via.stderr.String(), "node1:", "the remote rank printed NCCL's lines with its host: %s", via)
	r := via.readReport(t)
	require.NotEmpty(t, r.Diagnoses, "%s", via)
	assert.Equal(t, []string{"node1"}, r.Diagnoses[0].Hosts, "the diagnosis names the remote rank's host: %+v", r.Diagnoses[0])
	assert.NotContains(t, r.ids(), "memory-registration", "node0's own memlock (root, unlimited) does not judge a failure on node1: %+v", r.Diagnoses)
}

// Promise: a remote rank's failure under mpirun (a Gloo process group, the
// rank on node1 given an interface its host lacks) is reported as Gloo's,
// with its host when the output shows it, never as the launcher's host.
func TestMultinodeMpirunRemoteGlooFailure(t *testing.T) {
	torchrun(t) // torch must be importable
	rank := []string{"-x", "MODE=gloo", "-x", "MASTER_ADDR=" + addr(0), "-x", "MASTER_PORT=29500", "-x", "PYTHONPATH",
		"/usr/bin/python3", filepath.Join(harness, "mnrank.py")}
	plain, via := mpiPair(t, false, []string{"MODE=gloo"}, rank...)
	assert.NotEqual(t, 0, plain.code)
	r := via.readReport(t)
	require.NotEmpty(t, r.Diagnoses, "%s", via)
	// Without --tag-output mpirun relays the remote rank's lines bare:
	// Gloo's `Unable to find address for: eth9` names no host, and
	// neither does anything else mpirun or the rank prints (mpirun's
	// summary gives the process name only), so the host cannot be known
	// from the output (docs/diagnosis.md). What can be: the cause, titled
	// as Gloo's, and no claim that it happened on the launcher's host.
	d := r.Diagnoses[0]
	assert.Equal(t, "socket-interface", d.ID, "%v\n%s", r.ids(), via)
	assert.Contains(t, d.Title, "Gloo", "%+v", d)
	assert.NotContains(t, d.Title, "NCCL", "%+v", d)
	if strings.Contains(via.stdout.String()+via.stderr.String(), "node1") {
		assert.Contains(t, d.Hosts, "node1", "the failing rank's host, shown in the output: %+v", d)
	}
	assert.NotContains(t, d.Hosts, "node0", "not the launcher's own host: %+v", d)
}
