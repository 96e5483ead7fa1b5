//go:build slurm

package slurm

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ncclrun/ncclrun/internal/testutil"
)

// task runs argv as a Slurm task that knows its rank, as torchrun's
// RANK and WORLD_SIZE tell the fake NCCL workload. Its stderr goes to its
// stdout: srun relays a task's two streams separately, and a reader of
// both (ncclrun around srun) may then see PyTorch's error of a rank before
// NCCL's WARN line that explains it.
func task(argv ...string) []string {
	return append([]string{"bash", "-c", `RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS exec "$@" 2>&1`, "task"}, argv...)
}

// fake is the fake NCCL workload: one rank that pins 1 MiB as NCCL's
// ibv_reg_mr would, more than 64 KiB, less than any slurmd's limit here.
var fake = []string{"ncclrun", "fake-nccl", "--pin", "1MiB"}

func join(parts ...[]string) []string {
	var all []string
	for _, p := range parts {
		all = append(all, p...)
	}
	return all
}

// report is what the suite reads of ncclrun's --report.
type report struct {
	Diagnoses []struct {
		ID           string   `json:"id"`
		Certainty    string   `json:"certainty"`
		Hosts        []string `json:"hosts"`
		FirstFailure *struct {
			Host string `json:"host"`
			Rank *int   `json:"rank"`
		} `json:"first_failure"`
	} `json:"diagnoses"`
	FirstFailure *struct {
		ID   string `json:"id"`
		Host string `json:"host"`
		Rank *int   `json:"rank"`
	} `json:"first_failure"`
	ExitCode  int    `json:"exit_code"`
	Preflight doctor `json:"preflight"`
}

// doctor is doctor's JSON.
type doctor struct {
	Environment struct {
		Kind string `json:"kind"`
	} `json:"environment"`
	Checks []check `json:"checks"`
}

type check struct {
	ID      string         `json:"id"`
	Status  string         `json:"status"`
	Summary string         `json:"summary"`
	Fix     string         `json:"fix"`
	Details map[string]any `json:"details"`
}

func (d doctor) check(t *testing.T, id string) check {
	t.Helper()
	for _, c := range d.Checks {
		if c.ID == id {
			return c
		}
	}
	t.Fatalf("no %s check in %+v", id, d)
	return check{}
}

func (c *cluster) readReport(t *testing.T, name string) report {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(c.work, name))
	require.NoError(t, err)
	var r report
	require.NoError(t, json.Unmarshal(b, &r), string(b))
	return r
}

func parseDoctor(t *testing.T, s string) doctor {
	t.Helper()
	var d doctor
	require.NoError(t, json.Unmarshal([]byte(s), &d), s)
	return d
}

func ids(r report) []string {
	var out []string
	for _, d := range r.Diagnoses {
		out = append(out, d.ID)
	}
	return out
}

func slurmDetails(t *testing.T, c check) map[string]any {
	t.Helper()
	d, ok := c.Details["slurm"].(map[string]any)
	require.True(t, ok, "memlock details without slurm: %+v", c.Details)
	return d
}

// Scenario 1: slurmd started under a 64 KiB memlock limit (no
// LimitMEMLOCK=infinity), propagation at its default, a submitting shell
// with a larger limit: every task gets slurmd's 64 KiB.
func TestSlurmdMemlock64KiB(t *testing.T) {
	c := newCluster(t, config{slurmdMemlockKiB: "64"})
	lim := c.client("", srun(1, 1, "bash", "-c", "ulimit -Sl; ulimit -Hl")...)
	require.Equal(t, 0, lim.code, lim)
	require.Equal(t, "64\n64\n", lim.out, "the task's soft and hard memlock limits")

	plain := c.client("", srun(1, 1, task(fake...)...)...)
	via := c.client("", srun(1, 1, task(join([]string{"ncclrun", "--report", "s1.json", "--"}, fake)...)...)...)
	t.Logf("through ncclrun:\n%s", via)
	require.Equal(t, 1, plain.code, plain)
	assert.Equal(t, plain.code, via.code, "exit status through ncclrun")
	for _, want := range []string{"the limit is slurmd's own: slurmstepd (pid ", "has RLIMIT_MEMLOCK 64 KiB (soft=hard) (read from /proc/",
		"`LimitMEMLOCK=infinity`", "`systemctl restart slurmd`", "`PropagateResourceLimitsExcept=MEMLOCK`"} {
		assert.Contains(t, via.out, want, "the task's stderr, ncclrun's lines, goes to its stdout")
	}
	r := c.readReport(t, "s1.json")
	require.Equal(t, []string{"memlock"}, ids(r))
	assert.Equal(t, "certain", r.Diagnoses[0].Certainty)

	doc := c.client("", srun(1, 1, "ncclrun", "doctor", "--json", "--min-memlock", "1MiB")...)
	t.Logf("doctor:\n%s", doc)
	assert.Equal(t, 1, doc.code, "doctor fails memlock")
	m := parseDoctor(t, doc.out).check(t, "memlock")
	assert.Equal(t, "fail", m.Status)
	assert.Contains(t, m.Summary, "the limit is slurmd's own")
	assert.Contains(t, m.Fix, "`LimitMEMLOCK=infinity`")
	s := slurmDetails(t, m)
	assert.Equal(t, "slurmd", s["source"])
	assert.EqualValues(t, 65536, s["slurmstepd_hard"])
	assert.Contains(t, s["how"], "/limits of slurmstepd, an ancestor of this process")
}

// generousLimit fails or skips unless the test's own hard memlock limit,
// which the generous slurmd gets, can hold the workload's 1 MiB.
func generousLimit(t *testing.T) {
	var l syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(8 /* RLIMIT_MEMLOCK */, &l))
	if l.Max < 2<<20 {
		testutil.SkipOrFail(t, "the test's hard memlock limit %d is below 2 MiB: slurmd cannot be given more than 64 KiB", l.Max)
	}
}

// Scenario 2: slurmd's limit is generous, the submitting shell's is
// 64 KiB (the login-node case): Slurm propagates the soft limit only.
// ncclrun as the task's prefix raises soft to hard; doctor names the
// submitting host as the source.
func TestSlurmLoginNodeMemlock(t *testing.T) {
	generousLimit(t)
	c := newCluster(t, config{})
	// Slurm propagates the soft limit only, and leaves no SLURM_RLIMIT_*
	// variable in the task's environment (srun sends them, slurmstepd
	// consumes them): slurmstepd is the witness of slurmd's limit.
	lim := c.client("64", srun(1, 1, "bash", "-c", `ulimit -Sl; ulimit -Hl; env | grep -c '^SLURM_RLIMIT_' || true`)...)
	require.Equal(t, 0, lim.code, lim)
	hard := c.client("", "bash", "-c", "ulimit -Hl")
	assert.Equal(t, "64\n"+hard.out+"0\n", lim.out, "soft 64 KiB propagated, hard slurmd's, no SLURM_RLIMIT_* variable")
	plain := c.client("64", srun(1, 1, task(fake...)...)...)
	via := c.client("64", srun(1, 1, task(join([]string{"ncclrun", "--"}, fake)...)...)...)
	t.Logf("through ncclrun:\n%s", via)
	require.Equal(t, 1, plain.code, plain)
	assert.Equal(t, 0, via.code, "ncclrun raises the soft limit to slurmd's hard limit")
	assert.NotContains(t, via.out+via.err, "ncclrun:", "a healthy run prints nothing of ncclrun's own")

	doc := c.client("64", srun(1, 1, "ncclrun", "doctor", "--json", "--min-memlock", "1MiB")...)
	t.Logf("doctor:\n%s", doc)
	require.Equal(t, 0, doc.code, doc)
	m := parseDoctor(t, doc.out).check(t, "memlock")
	// ok where slurmd's limit is unlimited, warn ("enough, but not
	// unlimited") where the test's own hard limit is finite.
	assert.Contains(t, []string{"ok", "warn"}, m.Status)
	assert.EqualValues(t, 65536, m.Details["soft_before"])
	assert.Contains(t, m.Summary, "(raised from 64 KiB (soft; hard ")
	assert.Contains(t, m.Summary, "so Slurm's PropagateResourceLimits (ALL by default) set it from the shell that ran srun or sbatch on the submitting host")
	assert.Equal(t, "submit-host", slurmDetails(t, m)["source"])
}

// The fix ncclrun gives for the login-node case works: with
// PropagateResourceLimitsExcept=MEMLOCK a plain task from a 64 KiB shell
// keeps slurmd's limit and pins, and doctor has no source to name.
func TestSlurmPropagateExceptMemlock(t *testing.T) {
	generousLimit(t)
	c := newCluster(t, config{propagateExcept: "MEMLOCK"})
	plain := c.client("64", srun(1, 1, task(fake...)...)...)
	t.Logf("plain:\n%s", plain)
	assert.Equal(t, 0, plain.code, "the task keeps slurmd's limit")
	doc := c.client("64", srun(1, 1, "ncclrun", "doctor", "--json", "--min-memlock", "1MiB")...)
	require.Equal(t, 0, doc.code, doc)
	m := parseDoctor(t, doc.out).check(t, "memlock")
	assert.NotContains(t, m.Summary, "PropagateResourceLimits")
	assert.Equal(t, m.Details["soft"], m.Details["soft_before"], "nothing to raise")
}

// Scenario 3: `srun --label` output of 2 nodes x 2 tasks under ncclrun
// around srun: one diagnosis per cause, its tasks and hosts named, the
// first failure with its host; the labelled output relayed untouched.
func TestSlurmLabel2x2(t *testing.T) {
	c := newCluster(t, config{slurmdMemlockKiB: "64"})
	job := srun(2, 4, join([]string{"--ntasks-per-node=2", "--label"}, task(fake...))...)
	plain := c.client("", job...)
	via := c.client("", join([]string{"ncclrun", "--report", "s3.json", "--"}, job)...)
	t.Logf("through ncclrun:\n%s", via)
	require.Equal(t, 1, plain.code, plain)
	assert.Equal(t, plain.code, via.code)
	r := c.readReport(t, "s3.json")
	require.Equal(t, []string{"memlock"}, ids(r), "one diagnosis for the one cause of four tasks")
	assert.Equal(t, []string{"node0", "node1"}, r.Diagnoses[0].Hosts)
	require.NotNil(t, r.FirstFailure)
	assert.Contains(t, []string{"node0", "node1"}, r.FirstFailure.Host)
	require.NotNil(t, r.FirstFailure.Rank)
	assert.Contains(t, via.err, "memlock: Memory registration failed: locked-memory limit too low, 4 processes on node0, node1")
	assert.Contains(t, via.err, "first failure: memlock (rank ")
	for _, l := range []string{"0: node0:", "1: node0:", "2: node1:", "3: node1:"} {
		assert.Contains(t, via.out, l, "srun's labels reach ncclrun's stdout untouched")
	}
}

// workScript is a training loop that saves on SIGUSR1 and exits 0, and
// says so when SIGTERM reaches it first.
const workScript = `#!/bin/bash
trap 'echo "checkpoint saved at step $i"; echo "$i" > "ckpt-$NAME"; exit 0' USR1
trap 'echo "terminated before a checkpoint"; exit 143' TERM
echo training
i=0
while :; do i=$((i+1)); sleep 0.1 & wait $!; done
`

// Scenario 4: a graceful stop. Slurm signals a step as a whole:
// proctrack delivers scancel's signal, and SIGTERM at a cancel or at the
// time limit, to every process of the step, ncclrun's CMD included, so
// --stop-grace cannot hold a step-wide SIGTERM back. What reaches only
// ncclrun is a signal to the batch shell (scancel --batch, sbatch
// --signal=B:...), for a batch script that execs ncclrun around srun:
// ncclrun then sends --checkpoint-signal to srun, which forwards it to
// every task, and the terminating signal only after the grace. A step-wide
// checkpoint signal (scancel --signal=USR1) reaches the tasks directly,
// plain and through ncclrun alike.
func TestSlurmGracefulStop(t *testing.T) {
	generousLimit(t)
	c := newCluster(t, config{killWait: 10})
	require.NoError(t, os.WriteFile(filepath.Join(c.work, "work.sh"), []byte(workScript), 0o755))

	t.Run("scancel --signal=USR1", func(t *testing.T) {
		runs := map[string]*proc{}
		for name, prefix := range map[string][]string{
			"plain": nil,
			"via":   {"ncclrun", "--stop-grace", "5s", "--"},
		} {
			p := c.start("", srun(1, 1, join([]string{"--job-name=sl-usr1-" + name, "--export=ALL,NAME=usr1-" + name}, prefix, []string{"./work.sh"})...)...)
			require.NoError(t, p.out.await("training", p.done), "%s: %s", name, p.err)
			runs[name] = p
		}
		for _, name := range []string{"plain", "via"} {
			cancel := c.client("", "scancel", "--signal=USR1", "--name=sl-usr1-"+name)
			require.Equal(t, 0, cancel.code, cancel)
		}
		plain, via := runs["plain"].wait(t), runs["via"].wait(t)
		t.Logf("plain:\n%s\nthrough ncclrun:\n%s", plain, via)
		for name, r := range map[string]result{"plain": plain, "via": via} {
			assert.Equal(t, 0, r.code, name)
			assert.Contains(t, r.out, "checkpoint saved at step", name)
			assert.FileExists(t, filepath.Join(c.work, "ckpt-usr1-"+name))
		}
	})

	t.Run("scancel --batch --signal=TERM", func(t *testing.T) {
		type job struct {
			p   *proc
			out *lockedBuffer
		}
		runs := map[string]job{}
		for name, line := range map[string]string{
			"plain": "exec srun ./work.sh",
			"via":   "exec ncclrun --stop-grace 5s --checkpoint-signal SIGUSR1 -- srun ./work.sh",
		} {
			script := filepath.Join(c.work, "term-"+name+".sbatch")
			require.NoError(t, os.WriteFile(script, []byte("#!/bin/bash\n"+line+"\n"), 0o755))
			// The batch output is a FIFO the test reads: "training" in it
			// says the step runs, without polling a file.
			fifo := filepath.Join(c.work, "term-"+name+".out")
			require.NoError(t, syscall.Mkfifo(fifo, 0o666))
			require.NoError(t, os.Chmod(fifo, 0o666))
			out := newLocked()
			go func() {
				f, err := os.Open(fifo)
				if err == nil {
					_, _ = io.Copy(out, f)
					f.Close()
				}
			}()
			p := c.start("", "sbatch", "--wait", "--uid="+taskUID, "--gid="+taskUID, "-N1", "--job-name=sl-term-"+name,
				"--export=ALL,NAME=term-"+name, "-o", fifo, script)
			require.NoError(t, out.await("training", p.done), "%s: %s", name, p.err)
			runs[name] = job{p, out}
		}
		for _, name := range []string{"plain", "via"} {
			cancel := c.client("", "scancel", "--batch", "--signal=TERM", "--name=sl-term-"+name)
			require.Equal(t, 0, cancel.code, cancel)
		}
		plain, via := runs["plain"].p.wait(t), runs["via"].p.wait(t)
		t.Logf("plain: %s\n%s\nthrough ncclrun: %s\n%s", plain, runs["plain"].out, via, runs["via"].out)
		assert.NotEqual(t, 0, plain.code, "plain: srun takes SIGTERM as the end of the step, which ends without a checkpoint")
		assert.NotContains(t, runs["plain"].out.String(), "checkpoint saved")
		assert.NoFileExists(t, filepath.Join(c.work, "ckpt-term-plain"))
		assert.Equal(t, 0, via.code, "through ncclrun: the checkpoint, then the step's own exit")
		assert.Contains(t, runs["via"].out.String(), "checkpoint saved at step")
		assert.NotContains(t, runs["via"].out.String(), "terminated before a checkpoint")
		assert.FileExists(t, filepath.Join(c.work, "ckpt-term-via"))
	})

	t.Run("sbatch --signal=B:USR1@55", func(t *testing.T) {
		runs := map[string]*proc{}
		for name, line := range map[string]string{
			"plain": "exec ./work.sh",
			"via":   "exec ncclrun --stop-grace 5s -- ./work.sh",
		} {
			script := filepath.Join(c.work, "stop-"+name+".sbatch")
			require.NoError(t, os.WriteFile(script, []byte("#!/bin/bash\n"+line+"\n"), 0o755))
			runs[name] = c.start("", "sbatch", "--wait", "--uid="+taskUID, "--gid="+taskUID, "-N1", "--time=1", "--signal=B:USR1@55",
				"--export=ALL,NAME=signal-"+name, "-o", "stop-"+name+".out", script)
		}
		for name, p := range runs {
			r := p.wait(t)
			out, _ := os.ReadFile(filepath.Join(c.work, "stop-"+name+".out"))
			t.Logf("%s: %s\n%s", name, r, out)
			assert.Equal(t, 0, r.code, "%s: the batch script exits 0 after its checkpoint, before the time limit", name)
			assert.Contains(t, string(out), "checkpoint saved at step", name)
			assert.FileExists(t, filepath.Join(c.work, "ckpt-signal-"+name))
		}
	})
}

// Scenario 5: ncclrun around srun sees the login node's limits and every
// task's output; ncclrun as each task's prefix sees and fixes that
// task's limits. From a login shell whose hard limit is 64 KiB, around
// srun ncclrun cannot raise anything and names srun's propagation; as the
// prefix it raises each task's soft limit to slurmd's hard one.
func TestSlurmAroundVersusPrefix(t *testing.T) {
	generousLimit(t)
	c := newCluster(t, config{})
	// The login node's user is uid 1000 too: root would hold CAP_IPC_LOCK.
	job := []string{"srun", "-N2", "-n2", "bash", "-c", `RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS exec ncclrun fake-nccl --pin 1MiB 2>&1`}
	user := []string{"setpriv", "--reuid=" + taskUID, "--regid=" + taskUID, "--clear-groups"}
	plain := c.client("64", join(user, job)...)
	around := c.client("64", join(user, []string{"ncclrun", "--min-memlock", "1MiB", "--report", "around.json", "--"}, job)...)
	prefix := c.client("64", srun(2, 2, "bash", "-c", `exec ncclrun --report "prefix-$SLURM_PROCID.json" -- ncclrun fake-nccl --pin 1MiB`)...)
	t.Logf("around srun:\n%s\nas the prefix:\n%s", around, prefix)
	require.Equal(t, 1, plain.code, plain)
	assert.Equal(t, plain.code, around.code, "around srun")
	assert.Equal(t, 0, prefix.code, "as the task's prefix")

	assert.Contains(t, around.err, "srun passes this soft limit on to every task it starts (Slurm's PropagateResourceLimits, ALL by default)")
	assert.Contains(t, around.err, "`PropagateResourceLimitsExcept=MEMLOCK`")
	ra := c.readReport(t, "around.json")
	require.NotEmpty(t, ra.Diagnoses)
	assert.Contains(t, ids(ra), "memlock")
	assert.Contains(t, around.err, "memlock: Memory registration failed: locked-memory limit too low, 2 processes on node0, node1", "around srun sees every task's output")
	m := ra.Preflight.check(t, "memlock")
	assert.EqualValues(t, 65536, m.Details["hard"], "around srun sees the login node's own limit")
	assert.Equal(t, "srun", slurmDetails(t, m)["source"])
	for _, i := range []string{"0", "1"} {
		rp := c.readReport(t, "prefix-"+i+".json")
		assert.Empty(t, rp.Diagnoses)
		assert.Equal(t, "slurm", rp.Preflight.Environment.Kind)
		pm := rp.Preflight.check(t, "memlock")
		assert.EqualValues(t, 65536, pm.Details["soft_before"], "as the prefix it sees the task's propagated soft limit")
		assert.Equal(t, "submit-host", slurmDetails(t, pm)["source"])
	}
}

// Scenario 6: examples/slurm/train.sbatch runs for real, the fake NCCL
// workload in place of training, from a login shell at 64 KiB: every
// task's ncclrun raises its limit and writes its report.
func TestSlurmExampleSbatch(t *testing.T) {
	generousLimit(t)
	c := newCluster(t, config{})
	b, err := os.ReadFile("../examples/slurm/train.sbatch")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(c.work, "train.sbatch"), b, 0o755))
	r := c.client("64", "sbatch", "--wait", "--parsable", "--uid="+taskUID, "--gid="+taskUID, "-N2", "--ntasks-per-node=2", "--cpus-per-task=1", "--gpus-per-node=0",
		"--export=ALL,TRAIN_CMD=ncclrun fake-nccl --pin 1MiB", "-o", "train.out", "train.sbatch")
	out, _ := os.ReadFile(filepath.Join(c.work, "train.out"))
	t.Logf("sbatch: %s\n%s", r, out)
	require.Equal(t, 0, r.code)
	job := strings.TrimSpace(strings.Split(r.out, ";")[0])
	for _, i := range []string{"0", "1", "2", "3"} {
		rep := c.readReport(t, filepath.Join("reports", job, "task-"+i+".json"))
		assert.Equal(t, 0, rep.ExitCode)
		assert.EqualValues(t, 65536, rep.Preflight.check(t, "memlock").Details["soft_before"])
	}
}

// Scenario 7: a snapshot taken inside a Slurm task, read back with doctor
// --root, agrees with the live doctor in the same task.
func TestSlurmSnapshot(t *testing.T) {
	c := newCluster(t, config{slurmdMemlockKiB: "64"})
	r := c.client("", srun(1, 1, "bash", "-c", "ncclrun snapshot --output snap && ncclrun doctor --json --min-memlock 1MiB > live.json; true")...)
	require.Equal(t, 0, r.code, r)
	live, err := os.ReadFile(filepath.Join(c.work, "live.json"))
	require.NoError(t, err)
	root := c.client("", "ncclrun", "doctor", "--json", "--min-memlock", "1MiB", "--root", filepath.Join(c.work, "snap"))
	t.Logf("live:\n%s\n--root:\n%s", live, root)
	assert.Equal(t, 1, root.code, root)
	l, s := parseDoctor(t, string(live)), parseDoctor(t, root.out)
	assert.Equal(t, "slurm", s.Environment.Kind)
	assert.Equal(t, l.Environment.Kind, s.Environment.Kind)
	lm, sm := l.check(t, "memlock"), s.check(t, "memlock")
	assert.Equal(t, "fail", sm.Status)
	assert.Equal(t, lm.Status, sm.Status)
	assert.Equal(t, lm.Summary, sm.Summary)
	assert.Equal(t, lm.Fix, sm.Fix)
	assert.Equal(t, slurmDetails(t, lm), slurmDetails(t, sm))
	for _, lc := range l.Checks {
		assert.Equal(t, lc.Status, s.check(t, lc.ID).Status, lc.ID)
	}
}
