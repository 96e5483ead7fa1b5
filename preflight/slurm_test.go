package preflight

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ncclrun/ncclrun/internal/advice"
)

// TestSlurmMemlockSource: on Slurm the memlock check says where the
// task's limit came from, read from slurmstepd's limits (an ancestor of
// the task), and gives that source's fix.
func TestSlurmMemlockSource(t *testing.T) {
	slurmdFix := advice.Text(advice.SlurmdMemlock, advice.Slurm, advice.Who{})
	propFix := advice.Text(advice.SlurmPropagation, advice.Slurm, advice.Who{})
	generic := advice.Text(advice.RaiseMemlock, advice.Slurm, advice.Who{})
	for _, tc := range []struct {
		name, root string
		env        []string
		exec       string
		status     Status
		summary    string // a part of the summary
		fixPrefix  string
		source     string // details.slurm.source
		sourceFix  string // Facts.Memlock.SourceFix
	}{
		{name: "slurmd's own limit", root: "testdata/slurm-slurmd", env: []string{"SLURM_JOB_ID=1"}, status: Fail,
			summary:   "; the limit is slurmd's own: slurmstepd (pid 4242) has RLIMIT_MEMLOCK 64 KiB (soft=hard) (read from /proc/4242/limits of slurmstepd, an ancestor of this process, which slurmd starts with its own limits), and every task inherits it",
			fixPrefix: slurmdFix, source: SourceSlurmd, sourceFix: slurmdFix},
		{name: "propagated from the login node, raised", root: "testdata/slurm-login", env: []string{"SLURM_JOB_ID=1"}, status: OK,
			summary: "(raised from 64 KiB (soft; hard unlimited)); the soft limit 64 KiB is below slurmd's unlimited (soft=hard), so Slurm's PropagateResourceLimits (ALL by default) set it from the shell that ran srun or sbatch on the submitting host (slurmd's limit read from /proc/4242/limits",
			source:  SourceSubmitHost, sourceFix: propFix},
		{name: "ncclrun around srun", root: "testdata/slurm-slurmd", env: []string{}, exec: "/usr/bin/srun", status: Fail,
			summary:   "; srun passes this soft limit on to every task it starts (Slurm's PropagateResourceLimits, ALL by default)",
			fixPrefix: propFix + "; or ", source: SourceSrun, sourceFix: propFix},
		{name: "hard limit lowered after slurmstepd", root: "testdata/slurm-lowered", env: []string{"SLURM_JOB_ID=1"}, status: Fail,
			summary:   "; the hard limit 64 KiB differs from slurmd's unlimited (soft=hard) (read from /proc/4242/limits of slurmstepd, an ancestor of this process, which slurmd starts with its own limits): Slurm propagates soft limits only, so a process between slurmstepd and ncclrun",
			fixPrefix: generic, source: SourceUnknown},
		{name: "container with its own PID namespace", root: "testdata/slurm-container", env: []string{"SLURM_JOB_ID=1"}, status: Fail,
			summary:   "; whether the limit is slurmd's own or the submitting shell's is unknown: no slurmstepd among ncclrun's ancestors",
			fixPrefix: generic, source: SourceUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Run(context.Background(), Options{Root: tc.root, Env: tc.env, MinMemlock: 1 << 20, Plan: Plan{Exec: tc.exec}})
			got, ok := r.Check(IDMemlock)
			require.True(t, ok)
			assert.Equal(t, tc.status, got.Status, got.Summary)
			assert.Contains(t, got.Summary, tc.summary)
			if tc.fixPrefix != "" {
				assert.Equal(t, tc.fixPrefix, got.Fix[:min(len(got.Fix), len(tc.fixPrefix))])
			}
			d, _ := got.Details["slurm"].(map[string]any)
			assert.Equal(t, tc.source, d["source"])
			assert.Equal(t, tc.sourceFix, r.Facts.Memlock.SourceFix)
			assert.NotEmpty(t, r.Facts.Memlock.Source)
			assert.Equal(t, got.Fix, r.Facts.Memlock.Fix)
		})
	}
}

// TestSlurmMemlockNotSlurm: outside Slurm, with CMD not a Slurm client,
// nothing is added.
func TestSlurmMemlockNotSlurm(t *testing.T) {
	r := Run(context.Background(), Options{Root: "testdata/slurm-slurmd", Env: []string{}, MinMemlock: 1 << 20})
	got, _ := r.Check(IDMemlock)
	assert.NotContains(t, got.Summary, "slurm")
	assert.Nil(t, got.Details["slurm"])
	assert.Empty(t, r.Facts.Memlock.Source)
}

func TestStatComm(t *testing.T) {
	for _, tc := range []struct {
		in   string
		comm string
		ppid int
		bad  bool
	}{
		{in: "4242 (slurmstepd) S 4200 4242 4200 0", comm: "slurmstepd", ppid: 4200},
		{in: "7 (a b) c)) R 1 7", comm: "a b) c)", ppid: 1},
		{in: "7 slurmstepd S 1", bad: true},
		{in: "7 (x) S", bad: true},
		{in: "7 (x) S pid", bad: true},
	} {
		comm, ppid, err := statComm([]byte(tc.in))
		if tc.bad {
			assert.ErrorIs(t, err, ErrMalformed, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.comm, comm)
		assert.Equal(t, tc.ppid, ppid)
	}
}
