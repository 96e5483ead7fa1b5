package examples_test

import (
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/ncclrun/ncclrun/internal/testutil"
)

// failFastExamples are the files of the fail-fast examples, tested here.
var failFastExamples = []string{
	"kubernetes/fail-fast/job.yaml",
	"kubernetes/fail-fast/trainingruntime.yaml",
	"training/checkpoint_on_signal.py",
}

// exitDegraded is ncclrun's exit status after --on-degraded=fail stopped
// CMD (docs/contract.md).
const exitDegraded = 79

// trainingRuntime mirrors trainer.kubeflow.org/v1alpha1 TrainingRuntime
// as far as the example uses it; the JobSet spec is strict too.
type trainingRuntime struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		MLPolicy struct {
			NumNodes *int32 `json:"numNodes,omitempty"`
			Torch    *struct {
				NumProcPerNode any `json:"numProcPerNode,omitempty"`
			} `json:"torch,omitempty"`
		} `json:"mlPolicy"`
		Template struct {
			Spec struct {
				FailurePolicy *struct {
					MaxRestarts int32        `json:"maxRestarts,omitempty"`
					Rules       []jobSetRule `json:"rules,omitempty"`
				} `json:"failurePolicy,omitempty"`
				ReplicatedJobs []struct {
					Name     string                  `json:"name"`
					Replicas int32                   `json:"replicas,omitempty"`
					Template batchv1.JobTemplateSpec `json:"template"`
				} `json:"replicatedJobs"`
			} `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
}

// jobSetRule is a JobSet failurePolicy rule.
type jobSetRule struct {
	Name                string   `json:"name,omitempty"`
	Action              string   `json:"action"`
	OnJobFailureReasons []string `json:"onJobFailureReasons,omitempty"`
}

// checkFailFastJob checks one Job template against the ncclrun flags of
// its container: podFailurePolicy fails the Job on --misconfig-exit's
// status (and on exitDegraded with --on-degraded=fail) for that container,
// pods are never restarted in place (podFailurePolicy needs Never), and
// the grace period covers --stop-grace plus --kill-after.
func checkFailFastJob(t *testing.T, job batchv1.JobSpec) {
	t.Helper()
	spec := job.Template.Spec
	assert.Equal(t, corev1.RestartPolicyNever, spec.RestartPolicy, "podFailurePolicy needs restartPolicy Never")
	require.Len(t, spec.Containers, 1)
	c := spec.Containers[0]
	args := ncclrunArgs(c.Command)
	flag := func(name string) string {
		for _, a := range args {
			if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
				return v
			}
		}
		return ""
	}
	misconfig, err := strconv.Atoi(flag("misconfig-exit"))
	require.NoError(t, err, "--misconfig-exit=N in %v", args)
	want := []int32{int32(misconfig)}
	if flag("on-degraded") == "fail" {
		want = append(want, exitDegraded)
	}
	require.NotNil(t, job.PodFailurePolicy)
	found := false
	for _, r := range job.PodFailurePolicy.Rules {
		if r.Action != batchv1.PodFailurePolicyActionFailJob || r.OnExitCodes == nil {
			continue
		}
		found = true
		require.NotNil(t, r.OnExitCodes.ContainerName)
		assert.Equal(t, c.Name, *r.OnExitCodes.ContainerName)
		assert.Equal(t, batchv1.PodFailurePolicyOnExitCodesOpIn, r.OnExitCodes.Operator)
		assert.ElementsMatch(t, want, r.OnExitCodes.Values)
	}
	assert.True(t, found, "a FailJob rule on ncclrun's exit codes")
	grace, err := time.ParseDuration(flag("stop-grace"))
	require.NoError(t, err)
	killAfter, err := time.ParseDuration(flag("kill-after"))
	require.NoError(t, err)
	require.NotNil(t, spec.TerminationGracePeriodSeconds)
	assert.GreaterOrEqual(t, time.Duration(*spec.TerminationGracePeriodSeconds)*time.Second, grace+killAfter,
		"the kubelet's SIGKILL comes after --stop-grace and --kill-after")
	terminationLog(t, c)
	hasShmVolume(t, spec, c)
}

func TestFailFastJob(t *testing.T) {
	data, err := os.ReadFile("kubernetes/fail-fast/job.yaml")
	require.NoError(t, err)
	var j batchv1.Job
	require.NoError(t, yaml.UnmarshalStrict(data, &j))
	assert.Equal(t, "batch/v1", j.APIVersion)
	checkFailFastJob(t, j.Spec)
}

func TestFailFastTrainingRuntime(t *testing.T) {
	data, err := os.ReadFile("kubernetes/fail-fast/trainingruntime.yaml")
	require.NoError(t, err)
	var r trainingRuntime
	require.NoError(t, yaml.UnmarshalStrict(data, &r))
	assert.Equal(t, "trainer.kubeflow.org/v1alpha1", r.APIVersion)
	assert.Equal(t, "TrainingRuntime", r.Kind)
	fp := r.Spec.Template.Spec.FailurePolicy
	require.NotNil(t, fp)
	assert.True(t, slices.ContainsFunc(fp.Rules, func(rule jobSetRule) bool {
		return rule.Action == "FailJobSet" && slices.Contains(rule.OnJobFailureReasons, "PodFailurePolicy")
	}), "a Job failed by its podFailurePolicy fails the JobSet without a restart")
	require.Len(t, r.Spec.Template.Spec.ReplicatedJobs, 1)
	rj := r.Spec.Template.Spec.ReplicatedJobs[0]
	assert.Equal(t, "node", rj.Name, "Kubeflow Trainer's torch runtimes name the job and container node")
	checkFailFastJob(t, rj.Template.Spec)
}

// TestCheckpointScript: the example training script compiles and stays
// short (its behaviour under the real torchrun is the acceptance suite's
// TestTorchrunStopGrace).
func TestCheckpointScript(t *testing.T) {
	py := testutil.RequireTool(t, "python3")
	out, err := exec.Command(py, "-c", "import ast,sys; ast.parse(open(sys.argv[1]).read())", "training/checkpoint_on_signal.py").CombinedOutput()
	require.NoError(t, err, "%s", out)
	data, err := os.ReadFile("training/checkpoint_on_signal.py")
	require.NoError(t, err)
	code := 0
	for _, l := range strings.Split(string(data), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			code++
		}
	}
	assert.LessOrEqual(t, code, 12, "a short example")
	assert.Contains(t, string(data), "signal.SIGUSR1", "it saves on ncclrun's default --checkpoint-signal")
}
