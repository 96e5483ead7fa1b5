//go:build slurm

// Package slurm is the Slurm suite (`make slurm`, docs/slurm.md): a real
// slurmctld and one slurmd per node, started by the tests themselves, and
// ncclrun in the places a Slurm job puts it, each scenario run plain and
// through ncclrun with the exit statuses compared.
//
// A cluster is two nodes, each a network namespace with an address in
// 198.18.7.0/24 (RFC 2544's benchmark range) joined by a bridge that lives
// in a namespace of its own, and a hostname of its own (a UTS namespace
// made by unshare for slurmctld and each slurmd, which the steps inherit).
// Nothing is added to the machine's own network. munged, slurmctld and
// the slurmds run as root with a private key, socket, state, spool and log
// directory under a temporary directory, on ports of this suite, without
// cgroups (proctrack/linuxproc, task/none). The clients (srun, sbatch,
// scancel, and ncclrun around srun) run in node0's network namespace but
// under the machine's own hostname: a login node. Every process of a
// cluster is killed by its pid when its test ends, whatever the outcome.
//
// Without root, the Slurm and munge packages, ip(8), nsenter or unshare the
// tests skip, and under CI=true they fail.
package slurm

import (
	"bytes"
	"context"
	"crypto/rand"
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

	"github.com/stretchr/testify/require"

	"github.com/ncclrun/ncclrun/internal/testutil"
)

const (
	// nsPrefix starts every namespace the suite creates; the pid of the
	// test process follows, so a later run removes what a killed one left.
	nsPrefix = "sl-"
	// The suite's ports (slurmctld, slurmd, srun's range), away from
	// Slurm's defaults (6817, 6818) so that a real cluster is not reached.
	ctldPort, slurmdPort = 17817, 17818
	srunPorts            = "17900-17999"
	// hangGuard bounds every client command.
	hangGuard = 90 * time.Second
	// taskUID runs the tasks: root holds CAP_IPC_LOCK and would pin
	// whatever the limit.
	taskUID = "1000"
)

var (
	ncclrunBin string // built by TestMain, world-readable
	binDir     string
)

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "sl-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binDir, ncclrunBin = dir, filepath.Join(dir, "ncclrun")
	build := exec.Command("go", "build", "-o", ncclrunBin, "../cmd/ncclrun")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build ncclrun: %v\n%s", err, out)
		return 1
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// config is what differs between the scenarios' clusters.
type config struct {
	// slurmdMemlockKiB is the memlock limit (soft and hard) slurmd is
	// started with; "" keeps the test's own, as a slurmd with
	// LimitMEMLOCK=infinity would where the test's hard limit is
	// unlimited.
	slurmdMemlockKiB string
	// killWait is slurm.conf's KillWait (seconds from SIGTERM to SIGKILL
	// when a job is cancelled or reaches its limit).
	killWait int
	// propagateExcept is slurm.conf's PropagateResourceLimitsExcept ("":
	// not set, every limit propagates).
	propagateExcept string
}

// cluster is a running Slurm cluster of two nodes.
type cluster struct {
	t     *testing.T
	name  string // namespaces: name-sw, name-0, name-1
	dir   string // private: slurm.conf, munge, state, spool, logs
	work  string // the jobs' working directory (uid 1000 writes there)
	conf  string
	hosts []string
	logs  map[string]*lockedBuffer
}

var seq struct {
	sync.Mutex
	n int
}

func addr(i int) string { return fmt.Sprintf("198.18.7.%d", i+1) }

// newCluster starts munged, slurmctld and a slurmd on each of two nodes,
// and registers their teardown.
func newCluster(t *testing.T, cfg config) *cluster {
	t.Helper()
	testutil.RequireRoot(t)
	for _, tool := range []string{"setpriv", "munged", "slurmctld", "slurmd", "srun", "sbatch", "scancel", "scontrol", "ip", "nsenter", "unshare", "prlimit", "hostname"} {
		testutil.RequireTool(t, tool)
	}
	testutil.RemoveStaleNetns(t, nsPrefix)
	seq.Lock()
	seq.n++
	n := seq.n
	seq.Unlock()
	if cfg.killWait == 0 {
		cfg.killWait = 30
	}
	c := &cluster{t: t, name: fmt.Sprintf("%s%d-%d", nsPrefix, os.Getpid(), n), hosts: []string{"node0", "node1"}, logs: map[string]*lockedBuffer{}}
	var err error
	c.dir, err = os.MkdirTemp("", c.name+"-")
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			c.dumpLogs()
		}
		_ = os.RemoveAll(c.dir)
	})
	require.NoError(t, os.Chmod(c.dir, 0o755))
	c.work = filepath.Join(c.dir, "work")
	for _, d := range []string{"state", "log", "spool-node0", "spool-node1", "munge"} {
		require.NoError(t, os.MkdirAll(filepath.Join(c.dir, d), 0o755))
	}
	require.NoError(t, os.MkdirAll(c.work, 0o777))
	require.NoError(t, os.Chmod(c.work, 0o777))
	c.startMunge()
	c.network()
	c.conf = filepath.Join(c.dir, "slurm.conf")
	require.NoError(t, os.WriteFile(c.conf, []byte(c.slurmConf(cfg)), 0o644))
	c.daemon(0, "slurmctld", "Running as primary controller", "hostname node0 && exec slurmctld -D -i -f "+c.conf)
	ulimit := ""
	if cfg.slurmdMemlockKiB != "" {
		ulimit = "ulimit -l " + cfg.slurmdMemlockKiB + " && "
	}
	for i, h := range c.hosts {
		c.daemon(i, "slurmd-"+h, "slurmd started on", fmt.Sprintf("hostname %s && %sexec slurmd -D -N %s -f %s", h, ulimit, h, c.conf))
	}
	return c
}

func (c *cluster) slurmConf(cfg config) string {
	d := c.dir
	extra := ""
	if cfg.propagateExcept != "" {
		extra = "PropagateResourceLimitsExcept=" + cfg.propagateExcept + "\n"
	}
	return extra + fmt.Sprintf(`ClusterName=sl
SlurmctldHost=node0(%s)
SlurmctldPort=%d
SlurmdPort=%d
SrunPortRange=%s
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=%s/munge/munge.sock
CredType=cred/munge
StateSaveLocation=%s/state
SlurmdSpoolDir=%s/spool-%%n
SlurmctldPidFile=%s/slurmctld.pid
SlurmdPidFile=%s/slurmd-%%n.pid
SlurmctldLogFile=%s/log/slurmctld.log
SlurmdLogFile=%s/log/slurmd-%%n.log
SlurmdDebug=debug
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=%d
MinJobAge=600
NodeName=node0 NodeAddr=%s CPUs=2 State=UNKNOWN
NodeName=node1 NodeAddr=%s CPUs=2 State=UNKNOWN
PartitionName=sl Nodes=node0,node1 Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
`, addr(0), ctldPort, slurmdPort, srunPorts, d, d, d, d, d, d, d, cfg.killWait, addr(0), addr(1))
}

// startMunge starts munged with a key made on the spot. munged forks
// into the background only once its socket listens, so its return is
// the readiness signal; its pid file says whom to kill.
func (c *cluster) startMunge() {
	t := c.t
	m := filepath.Join(c.dir, "munge")
	key := make([]byte, 1024)
	_, err := rand.Read(key)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(m, "munge.key"), key, 0o400))
	pidFile := filepath.Join(m, "munged.pid")
	cmd := exec.Command("munged", "--force", "--socket="+filepath.Join(m, "munge.sock"), "--key-file="+filepath.Join(m, "munge.key"),
		"--pid-file="+pidFile, "--log-file="+filepath.Join(c.dir, "log", "munged.log"), "--seed-file="+filepath.Join(m, "munged.seed"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		testutil.SkipOrFail(t, "munged cannot start: %v: %s", err, out)
	}
	b, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
}

// network makes the nodes' namespaces, joined by the bridge slbr0.
func (c *cluster) network() {
	t := c.t
	t.Cleanup(c.remove)
	sw := c.name + "-sw"
	steps := [][]string{{"netns", "add", sw}, {"-n", sw, "link", "add", "slbr0", "type", "bridge"}, {"-n", sw, "link", "set", "slbr0", "up"}}
	for i := range c.hosts {
		ns, veth := c.ns(i), fmt.Sprintf("v%d", i)
		steps = append(steps, []string{"netns", "add", ns},
			[]string{"link", "add", "eth0", "netns", ns, "type", "veth", "peer", "name", veth, "netns", sw},
			[]string{"-n", sw, "link", "set", veth, "master", "slbr0", "up"},
			[]string{"-n", ns, "addr", "add", addr(i) + "/24", "dev", "eth0"},
			[]string{"-n", ns, "link", "set", "eth0", "up"},
			[]string{"-n", ns, "link", "set", "lo", "up"})
	}
	for _, s := range steps {
		if out, err := exec.Command("ip", s...).CombinedOutput(); err != nil {
			testutil.SkipOrFail(t, "network namespaces cannot be had: ip %s: %v: %s", strings.Join(s, " "), err, out)
		}
	}
}

func (c *cluster) ns(i int) string { return fmt.Sprintf("%s-%d", c.name, i) }

// nsenter enters node i's network namespace only: unlike `ip netns
// exec` it leaves /sys (and so /sys/fs/cgroup) as it is.
func (c *cluster) nsenter(i int) []string {
	return []string{"nsenter", "--net=/run/netns/" + c.ns(i)}
}

// daemon starts a daemon in the foreground on node i, in a UTS namespace
// of its own, and waits for the line that says it is up.
func (c *cluster) daemon(i int, name, ready, script string) {
	t := c.t
	argv := append(c.nsenter(i), "unshare", "--uts", "sh", "-c", script)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	out := &lockedBuffer{notify: make(chan struct{}, 1)}
	c.logs[name] = out
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = 5 * time.Second
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
	if err := out.await(ready, done); err != nil {
		t.Fatalf("%s: %v\n%s", name, err, out)
	}
}

// remove kills every process in the cluster's namespaces (slurmctld,
// the slurmds, slurmstepd and the tasks) by pid and deletes the
// namespaces; the veth pairs and the bridge go with them.
func (c *cluster) remove() {
	testutil.RemoveNetns(func(ns string) bool { return strings.HasPrefix(ns, c.name+"-") }) // the switch, c.name-sw, too
}

func (c *cluster) dumpLogs() {
	for name, b := range c.logs {
		c.t.Logf("--- %s\n%s", name, tail(b.String(), 3000))
	}
	for _, f := range []string{"slurmctld.log", "slurmd-node0.log", "slurmd-node1.log"} {
		if b, err := os.ReadFile(filepath.Join(c.dir, "log", f)); err == nil {
			c.t.Logf("--- %s\n%s", f, tail(string(b), 3000))
		}
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// env is a client's environment: this suite's slurm.conf, ncclrun on
// PATH, nothing of the test's own environment (srun passes it on).
func (c *cluster) env(extra ...string) []string {
	return append([]string{"PATH=" + binDir + ":/usr/sbin:/usr/bin:/sbin:/bin", "SLURM_CONF=" + c.conf, "HOME=/", "LANG=C.UTF-8"}, extra...)
}

// result is a client command's outcome.
type result struct {
	code     int
	out, err string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout\n%s--- stderr\n%s", r.code, r.out, r.err)
}

// client runs argv on the login node (node0's network namespace, the
// machine's hostname), under a memlock limit of memlockKiB (soft and
// hard; "" keeps the test's own), in the work directory.
func (c *cluster) client(memlockKiB string, argv ...string) result {
	c.t.Helper()
	for try := 1; ; try++ {
		r := c.start(memlockKiB, argv...).wait(c.t)
		// munge refusing srun's own credential aborts the step before any
		// task starts (seen once on a loaded VM): Slurm's failure, not the
		// job's, so the command runs again, at most twice more.
		if try == 3 || !strings.Contains(r.err, "Protocol authentication error") {
			return r
		}
		c.t.Logf("munge refused a credential before the step launched; running %q again:\n%s", argv, r.err)
	}
}

// proc is a running client.
type proc struct {
	cmd      *exec.Cmd
	out, err *lockedBuffer
	done     chan struct{}
	res      result
}

func (c *cluster) start(memlockKiB string, argv ...string) *proc {
	c.t.Helper()
	all := c.nsenter(0)
	if memlockKiB != "" {
		b := memlockKiB
		if b != "unlimited" {
			k, err := strconv.Atoi(memlockKiB)
			require.NoError(c.t, err)
			b = strconv.Itoa(k << 10)
		}
		all = append(all, "prlimit", "--memlock="+b+":"+b, "--")
	}
	all = append(all, argv...)
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	cmd := exec.CommandContext(ctx, all[0], all[1:]...)
	cmd.Env = c.env()
	cmd.Dir = c.work
	p := &proc{cmd: cmd, out: newLocked(), err: newLocked(), done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.err
	cmd.WaitDelay = 5 * time.Second
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(c.t, cmd.Start())
	go func() {
		defer cancel()
		err := cmd.Wait()
		p.res.code = exitCode(err)
		p.res.out, p.res.err = p.out.String(), p.err.String()
		close(p.done)
	}()
	c.t.Cleanup(func() { _ = cmd.Process.Kill(); <-p.done })
	return p
}

func (p *proc) wait(t *testing.T) result {
	t.Helper()
	<-p.done
	return p.res
}

func exitCode(err error) int {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return -1
}

// srun is srun's argv for a job of the given shape whose tasks run as
// uid 1000.
func srun(nodes, tasks int, rest ...string) []string {
	return append([]string{"srun", "-N", strconv.Itoa(nodes), "-n", strconv.Itoa(tasks), "--uid=" + taskUID, "--gid=" + taskUID}, rest...)
}

// lockedBuffer keeps what is written and wakes await.
type lockedBuffer struct {
	mu     sync.Mutex
	b      bytes.Buffer
	notify chan struct{}
}

func newLocked() *lockedBuffer { return &lockedBuffer{notify: make(chan struct{}, 1)} }

func (w *lockedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case w.notify <- struct{}{}:
	default:
	}
	return w.b.Write(p)
}

func (w *lockedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// await waits until s was written; it fails when done closes first or
// hangGuard passes.
func (w *lockedBuffer) await(s string, done <-chan struct{}) error {
	timeout := time.After(hangGuard)
	for !strings.Contains(w.String(), s) {
		select {
		case <-w.notify:
		case <-done:
			if strings.Contains(w.String(), s) {
				return nil
			}
			return fmt.Errorf("ended before printing %q", s)
		case <-timeout:
			return fmt.Errorf("%q not printed within %v", s, hangGuard)
		}
	}
	return nil
}
