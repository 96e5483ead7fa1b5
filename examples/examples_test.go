package examples_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/ncclrun/ncclrun/internal/testutil"
)

// Minimal mirrors of the CRDs' schemas, decoded strictly like the k8s.io
// types: an unknown or misplaced field fails the test.

// replicaSpec is kubeflow's common ReplicaSpec (PyTorchJob, MPIJob).
type replicaSpec struct {
	Replicas      *int32                 `json:"replicas,omitempty"`
	RestartPolicy string                 `json:"restartPolicy,omitempty"`
	Template      corev1.PodTemplateSpec `json:"template"`
}

type runPolicy struct {
	CleanPodPolicy          *string `json:"cleanPodPolicy,omitempty"`
	TTLSecondsAfterFinished *int32  `json:"ttlSecondsAfterFinished,omitempty"`
	ActiveDeadlineSeconds   *int64  `json:"activeDeadlineSeconds,omitempty"`
	BackoffLimit            *int32  `json:"backoffLimit,omitempty"`
	Suspend                 *bool   `json:"suspend,omitempty"`
}

// pyTorchJob is kubeflow.org/v1 PyTorchJob.
type pyTorchJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		RunPolicy     runPolicy `json:"runPolicy,omitempty"`
		ElasticPolicy *struct {
			MinReplicas  *int32 `json:"minReplicas,omitempty"`
			MaxReplicas  *int32 `json:"maxReplicas,omitempty"`
			RDZVBackend  string `json:"rdzvBackend,omitempty"`
			MaxRestarts  *int32 `json:"maxRestarts,omitempty"`
			NProcPerNode *int32 `json:"nProcPerNode,omitempty"`
		} `json:"elasticPolicy,omitempty"`
		NprocPerNode        *string                `json:"nprocPerNode,omitempty"`
		PyTorchReplicaSpecs map[string]replicaSpec `json:"pytorchReplicaSpecs"`
	} `json:"spec"`
}

// mpiJob is kubeflow.org/v2beta1 MPIJob.
type mpiJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		SlotsPerWorker         *int32                 `json:"slotsPerWorker,omitempty"`
		RunLauncherAsWorker    *bool                  `json:"runLauncherAsWorker,omitempty"`
		RunPolicy              runPolicy              `json:"runPolicy,omitempty"`
		MPIReplicaSpecs        map[string]replicaSpec `json:"mpiReplicaSpecs"`
		SSHAuthMountPath       string                 `json:"sshAuthMountPath,omitempty"`
		LauncherCreationPolicy string                 `json:"launcherCreationPolicy,omitempty"`
		MPIImplementation      string                 `json:"mpiImplementation,omitempty"`
	} `json:"spec"`
}

// jobSet is jobset.x-k8s.io/v1alpha2 JobSet.
type jobSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		ReplicatedJobs []struct {
			Name     string                  `json:"name"`
			Replicas int32                   `json:"replicas,omitempty"`
			Template batchv1.JobTemplateSpec `json:"template"`
		} `json:"replicatedJobs"`
		Network *struct {
			EnableDNSHostnames       *bool  `json:"enableDNSHostnames,omitempty"`
			Subdomain                string `json:"subdomain,omitempty"`
			PublishNotReadyAddresses *bool  `json:"publishNotReadyAddresses,omitempty"`
		} `json:"network,omitempty"`
		SuccessPolicy *struct {
			Operator             string   `json:"operator"`
			TargetReplicatedJobs []string `json:"targetReplicatedJobs,omitempty"`
		} `json:"successPolicy,omitempty"`
		FailurePolicy *struct {
			MaxRestarts int32 `json:"maxRestarts,omitempty"`
		} `json:"failurePolicy,omitempty"`
		StartupPolicy *struct {
			StartupPolicyOrder string `json:"startupPolicyOrder"`
		} `json:"startupPolicy,omitempty"`
		Suspend *bool `json:"suspend,omitempty"`
	} `json:"spec"`
}

// pattern is the way out of the memlock trap a pod template claims.
type pattern int

const (
	rootDropToUser pattern = iota // (a) root, IPC_LOCK+SETUID+SETGID, ncclrun --user
	nonRootFileCap                // (b) non-root, IPC_LOCK added, exec-form ncclrun
	nodeLimit                     // (c) plain non-root pod, no capability
	nriLimit                      // (d) per-pod limit from the runtime (NRI ulimit-adjuster), no capability
	mpiLauncher                   // ncclrun around mpirun, ncclrun --no-watch per rank
	mpiWorker                     // sshd as root with IPC_LOCK: ranks arrive over ssh
)

// manifests lists every Kubernetes manifest with its kind and the pattern
// of each pod template (by replica name where the kind has several).
var manifests = []struct {
	file     string
	kind     string
	patterns map[string]pattern
}{
	{"kubernetes/a-root-drop-to-user.yaml", "Pod", map[string]pattern{"": rootDropToUser}},
	{"kubernetes/b-nonroot-filecap.yaml", "Pod", map[string]pattern{"": nonRootFileCap}},
	{"kubernetes/c-node-memlock/pod.yaml", "Pod", map[string]pattern{"": nodeLimit}},
	{"kubernetes/d-nri-ulimit/pod.yaml", "Pod", map[string]pattern{"": nriLimit}},
	{"kubernetes/pytorchjob.yaml", "PyTorchJob", map[string]pattern{"Master": rootDropToUser, "Worker": rootDropToUser}},
	{"kubernetes/jobset.yaml", "JobSet", map[string]pattern{"trainer": nonRootFileCap}},
	{"kubernetes/mpijob.yaml", "MPIJob", map[string]pattern{"Launcher": mpiLauncher, "Worker": mpiWorker}},
}

// decode parses data strictly into the type of kind and returns its pod
// templates by replica name ("" for a Pod).
func decode(t *testing.T, kind string, data []byte) map[string]corev1.PodSpec {
	t.Helper()
	var tm metav1.TypeMeta
	require.NoError(t, yaml.Unmarshal(data, &tm))
	require.Equal(t, kind, tm.Kind)
	specs := map[string]corev1.PodSpec{}
	switch kind {
	case "Pod":
		var p corev1.Pod
		require.NoError(t, yaml.UnmarshalStrict(data, &p))
		require.Equal(t, "v1", p.APIVersion)
		specs[""] = p.Spec
	case "PyTorchJob":
		var j pyTorchJob
		require.NoError(t, yaml.UnmarshalStrict(data, &j))
		require.Equal(t, "kubeflow.org/v1", j.APIVersion)
		for name, r := range j.Spec.PyTorchReplicaSpecs {
			require.Contains(t, []string{"Master", "Worker"}, name)
			for _, c := range r.Template.Spec.Containers {
				assert.Equal(t, "pytorch", c.Name, "the training operator needs the container named pytorch")
			}
			specs[name] = r.Template.Spec
		}
	case "MPIJob":
		var j mpiJob
		require.NoError(t, yaml.UnmarshalStrict(data, &j))
		require.Equal(t, "kubeflow.org/v2beta1", j.APIVersion)
		for name, r := range j.Spec.MPIReplicaSpecs {
			require.Contains(t, []string{"Launcher", "Worker"}, name)
			specs[name] = r.Template.Spec
		}
	case "JobSet":
		var j jobSet
		require.NoError(t, yaml.UnmarshalStrict(data, &j))
		require.Equal(t, "jobset.x-k8s.io/v1alpha2", j.APIVersion)
		for _, r := range j.Spec.ReplicatedJobs {
			specs[r.Name] = r.Template.Spec.Template.Spec
		}
	default:
		t.Fatalf("no decoder for kind %s", kind)
	}
	return specs
}

func TestStrictDecodingRejectsUnknownFields(t *testing.T) {
	data, err := os.ReadFile("kubernetes/b-nonroot-filecap.yaml")
	require.NoError(t, err)
	bad := bytes.Replace(data, []byte("  restartPolicy: Never"), []byte("  restartPolicy: Never\n  restartPolcy: Never"), 1)
	require.NotEqual(t, data, bad)
	var p corev1.Pod
	assert.Error(t, yaml.UnmarshalStrict(bad, &p), "a misspelt field must fail")
	misplaced := bytes.Replace(data, []byte("    runAsUser: 1000"), []byte("    runAsUser: 1000\n    capabilities: {add: [IPC_LOCK]}"), 1)
	assert.Error(t, yaml.UnmarshalStrict(misplaced, &p), "capabilities is not a pod-level field")
}

func TestManifests(t *testing.T) {
	for _, m := range manifests {
		t.Run(m.file, func(t *testing.T) {
			data, err := os.ReadFile(m.file)
			require.NoError(t, err)
			specs := decode(t, m.kind, data)
			require.Len(t, specs, len(m.patterns))
			for name, pat := range m.patterns {
				spec, ok := specs[name]
				require.True(t, ok, "pod template %q", name)
				checkPod(t, name, spec, pat)
			}
		})
	}
}

func effectiveUser(spec corev1.PodSpec, c corev1.Container) *int64 {
	if c.SecurityContext != nil && c.SecurityContext.RunAsUser != nil {
		return c.SecurityContext.RunAsUser
	}
	if spec.SecurityContext != nil {
		return spec.SecurityContext.RunAsUser
	}
	return nil
}

func caps(c corev1.Container) (add, drop []string) {
	if c.SecurityContext == nil || c.SecurityContext.Capabilities == nil {
		return nil, nil
	}
	for _, a := range c.SecurityContext.Capabilities.Add {
		add = append(add, string(a))
	}
	for _, d := range c.SecurityContext.Capabilities.Drop {
		drop = append(drop, string(d))
	}
	return add, drop
}

func isNcclrun(s string) bool { return path.Base(s) == "ncclrun" }

// ncclrunArgs returns ncclrun's own arguments (before "--").
func ncclrunArgs(cmd []string) []string {
	i := slices.Index(cmd, "--")
	if i < 0 {
		return nil
	}
	return cmd[1:i]
}

func hasShmVolume(t *testing.T, spec corev1.PodSpec, c corev1.Container) {
	t.Helper()
	var vol string
	for _, m := range c.VolumeMounts {
		if m.MountPath == "/dev/shm" {
			vol = m.Name
		}
	}
	require.NotEmpty(t, vol, "container %s mounts nothing on /dev/shm", c.Name)
	for _, v := range spec.Volumes {
		if v.Name == vol {
			require.NotNil(t, v.EmptyDir, "/dev/shm must be an emptyDir")
			assert.Equal(t, corev1.StorageMediumMemory, v.EmptyDir.Medium, "/dev/shm must be memory-backed")
			return
		}
	}
	t.Fatalf("volume %s not defined", vol)
}

func terminationLog(t *testing.T, c corev1.Container) {
	t.Helper()
	require.NotEmpty(t, c.TerminationMessagePath, "container %s: terminationMessagePath", c.Name)
	want := c.TerminationMessagePath
	found := false
	for _, a := range ncclrunArgs(c.Command) {
		if v, ok := strings.CutPrefix(a, "--termination-log="); ok {
			assert.Equal(t, want, v)
			found = true
		}
	}
	for _, e := range c.Env {
		if e.Name == "NCCLRUN_TERMINATION_LOG" {
			assert.Equal(t, want, e.Value)
			found = true
		}
	}
	assert.True(t, found, "container %s: ncclrun is told to write %s", c.Name, want)
}

func checkPod(t *testing.T, name string, spec corev1.PodSpec, pat pattern) {
	t.Helper()
	require.Len(t, spec.Containers, 1, "pod template %q", name)
	c := spec.Containers[0]
	uid := effectiveUser(spec, c)
	add, drop := caps(c)
	if pat != mpiWorker {
		require.NotEmpty(t, c.Command)
		assert.True(t, isNcclrun(c.Command[0]), "%q: the container command starts with ncclrun: %v", name, c.Command)
		assert.True(t, path.IsAbs(c.Command[0]), "%q: exec form with ncclrun's absolute path", name)
		assert.Contains(t, c.Command, "--", "%q: ncclrun's flags end with --", name)
		assert.Empty(t, c.Args, "%q: the whole command is in command", name)
		terminationLog(t, c)
	}
	if pat != mpiLauncher {
		hasShmVolume(t, spec, c)
	}
	switch pat {
	case rootDropToUser:
		require.NotNil(t, uid, "%q: runAsUser must be explicit", name)
		assert.Equal(t, int64(0), *uid)
		assert.ElementsMatch(t, []string{"IPC_LOCK", "SETUID", "SETGID"}, add)
		assert.Equal(t, []string{"ALL"}, drop)
		assert.True(t, slices.ContainsFunc(ncclrunArgs(c.Command), func(a string) bool {
			return regexp.MustCompile(`^--user=\d+(:\d+)?$`).MatchString(a)
		}), "%q: ncclrun --user=UID:GID drops to the training user", name)
	case nonRootFileCap:
		require.NotNil(t, uid, "%q: runAsUser must be explicit", name)
		assert.NotEqual(t, int64(0), *uid)
		assert.Equal(t, []string{"IPC_LOCK"}, add, "%q: IPC_LOCK in the bounding set for the file capability", name)
		assert.NotContains(t, c.Command, "sh", "exec form: no shell may exec ncclrun (row 7b)")
	case nodeLimit, nriLimit:
		require.NotNil(t, uid)
		assert.NotEqual(t, int64(0), *uid)
		assert.Empty(t, add, "%q: the node or NRI limit needs no capability", name)
	case mpiLauncher:
		i := slices.Index(c.Command, "mpirun")
		require.Positive(t, i, "%q: ncclrun runs mpirun", name)
		rest := c.Command[i:]
		j := slices.IndexFunc(rest, isNcclrun)
		require.Positive(t, j, "%q: mpirun runs ncclrun per rank", name)
		assert.Equal(t, []string{"--no-watch", "--"}, rest[j+1:j+3], "%q: per-rank ncclrun --no-watch --", name)
	case mpiWorker:
		require.NotNil(t, uid)
		assert.Equal(t, int64(0), *uid, "ranks started by sshd as root hold the bounding set")
		assert.Contains(t, add, "IPC_LOCK")
	}
}

func TestComposeFile(t *testing.T) {
	data, err := os.ReadFile("docker/compose.yaml")
	require.NoError(t, err)
	var f struct {
		Services map[string]struct {
			Image       string            `json:"image"`
			Entrypoint  []string          `json:"entrypoint,omitempty"`
			Command     []string          `json:"command,omitempty"`
			User        string            `json:"user,omitempty"`
			Ulimits     map[string]any    `json:"ulimits"`
			CapAdd      []string          `json:"cap_add"`
			CapDrop     []string          `json:"cap_drop,omitempty"`
			ShmSize     string            `json:"shm_size"`
			Environment map[string]string `json:"environment,omitempty"`
			Volumes     []string          `json:"volumes,omitempty"`
			Deploy      map[string]any    `json:"deploy,omitempty"`
		} `json:"services"`
	}
	require.NoError(t, yaml.UnmarshalStrict(data, &f))
	require.NotEmpty(t, f.Services)
	for name, s := range f.Services {
		js, _ := json.Marshal(s.Ulimits["memlock"])
		assert.Contains(t, []string{`-1`, `{"hard":-1,"soft":-1}`}, string(js), "%s: memlock unlimited", name)
		assert.Contains(t, s.CapAdd, "IPC_LOCK", name)
		assert.NotEmpty(t, s.ShmSize, name)
		assert.Empty(t, s.Entrypoint, "%s: the image's ENTRYPOINT (ncclrun --) is kept", name)
	}
	if dc, err := exec.LookPath("docker-compose"); err == nil {
		out, err := exec.Command(dc, "-f", "docker/compose.yaml", "config", "-q").CombinedOutput()
		assert.NoError(t, err, "docker-compose config: %s", out)
	}
}

var scripts = []string{"docker/docker-run.sh", "slurm/train.sbatch", "local/reproduce-memlock.sh"}

func TestScriptsBashN(t *testing.T) {
	bash := testutil.RequireTool(t, "bash")
	for _, s := range scripts {
		out, err := exec.Command(bash, "-n", s).CombinedOutput()
		assert.NoError(t, err, "bash -n %s: %s", s, out)
		st, err := os.Stat(s)
		require.NoError(t, err)
		assert.NotZero(t, st.Mode()&0o111, "%s is executable", s)
	}
}

func TestScriptsShellcheck(t *testing.T) {
	sc := testutil.RequireTool(t, "shellcheck")
	for _, s := range scripts {
		out, err := exec.Command(sc, "--shell=bash", s).CombinedOutput()
		assert.NoError(t, err, "shellcheck %s:\n%s", s, out)
	}
}

// joinedLines returns the script's lines with backslash continuations joined.
func joinedLines(t *testing.T, file string) []string {
	t.Helper()
	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()
	var lines []string
	var cur strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		if s, ok := strings.CutSuffix(l, "\\"); ok {
			cur.WriteString(strings.TrimSpace(s) + " ")
			continue
		}
		cur.WriteString(strings.TrimSpace(l))
		lines = append(lines, cur.String())
		cur.Reset()
	}
	return lines
}

func TestDockerRunLines(t *testing.T) {
	n := 0
	for _, l := range joinedLines(t, "docker/docker-run.sh") {
		if !strings.HasPrefix(l, "docker run ") {
			continue
		}
		n++
		assert.Regexp(t, `--shm-size=\S+`, l)
		fix := strings.Contains(l, "--ulimit memlock=-1:-1") || strings.Contains(l, "--cap-add IPC_LOCK")
		repro := strings.Contains(l, "--ulimit memlock=65536:65536")
		assert.True(t, fix || repro, "every docker run line applies a fix or reproduces the failure: %s", l)
		if strings.Contains(l, "--user=") {
			assert.Contains(t, l, "--cap-add SETUID")
			assert.Contains(t, l, "--cap-add SETGID")
			assert.Contains(t, l, "--cap-add IPC_LOCK")
		}
	}
	assert.Equal(t, 4, n, "one docker run per case")
}

func TestSlurmScript(t *testing.T) {
	lines := joinedLines(t, "slurm/train.sbatch")
	srun := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "srun ") })
	require.GreaterOrEqual(t, srun, 0, "an srun line")
	assert.Regexp(t, `exec ncclrun .*-- \$\{TRAIN_CMD:-python train\.py\}'$`, lines[srun], "one ncclrun per task, TRAIN_CMD or python train.py")
	text := strings.Join(lines, "\n")
	assert.Contains(t, text, "PropagateResourceLimitsExcept=MEMLOCK")
	assert.Regexp(t, `(?m)^#SBATCH --ntasks-per-node=\d+$`, text)
}

// TestReproduceScript runs the script against a stand-in ncclrun that
// prints its arguments, to check what it asks ncclrun to do.
func TestReproduceScript(t *testing.T) {
	bash := testutil.RequireTool(t, "bash")
	dir := t.TempDir()
	stub := filepath.Join(dir, "ncclrun")
	require.NoError(t, os.WriteFile(stub, []byte("#!/bin/sh\nfor a in \"$0\" \"$@\"; do printf '%s\\n' \"$a\"; done\n"), 0o755))
	tests := []struct {
		env  []string
		args []string
		want []string
	}{
		{nil, nil, []string{stub, "run", "--memlock", "64KiB", "--drop-cap", "IPC_LOCK", "--", stub, "fake-nccl", "--ranks", "2", "--pin", "16MiB"}},
		{[]string{"MEMLOCK=8MiB"}, []string{"torchrun", "--nproc-per-node=2", "train.py"}, []string{stub, "run", "--memlock", "8MiB", "--drop-cap", "IPC_LOCK", "--", "torchrun", "--nproc-per-node=2", "train.py"}},
	}
	for _, tc := range tests {
		cmd := exec.Command(bash, append([]string{"local/reproduce-memlock.sh"}, tc.args...)...)
		cmd.Env = append([]string{"PATH=/usr/bin:/bin", "NCCLRUN=" + stub}, tc.env...)
		out, err := cmd.Output()
		require.NoError(t, err)
		assert.Equal(t, tc.want, strings.Split(strings.TrimSuffix(string(out), "\n"), "\n"))
	}
	// Without NCCLRUN, ncclrun is looked up on PATH.
	cmd := exec.Command(bash, "local/reproduce-memlock.sh")
	cmd.Env = []string{"PATH=" + dir + ":/usr/bin:/bin"}
	out, err := cmd.Output()
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(out), stub+"\nrun\n"), string(out))
}

// TestNodeDropIns checks the node-level files: systemd drop-ins setting
// LimitMEMLOCK=infinity under [Service], and CRI-O's default_ulimits.
func TestNodeDropIns(t *testing.T) {
	for _, f := range []string{"kubernetes/c-node-memlock/containerd-memlock.conf", "kubernetes/c-node-memlock/crio-memlock.conf"} {
		assert.Equal(t, map[string]map[string]string{"Service": {"LimitMEMLOCK": "infinity"}}, parseINI(t, f), f)
	}
	assert.Equal(t, map[string]map[string]string{"crio.runtime": {"default_ulimits": `["memlock=-1:-1"]`}},
		parseINI(t, "kubernetes/c-node-memlock/crio-ulimits.conf"))
}

// parseINI reads [section] key=value files (systemd units, simple TOML);
// any other non-comment line fails the test.
func parseINI(t *testing.T, file string) map[string]map[string]string {
	t.Helper()
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	out := map[string]map[string]string{}
	sec := ""
	for i, l := range strings.Split(string(data), "\n") {
		l = strings.TrimSpace(l)
		switch {
		case l == "" || strings.HasPrefix(l, "#"):
		case strings.HasPrefix(l, "[") && strings.HasSuffix(l, "]"):
			sec = strings.Trim(l, "[]")
			out[sec] = map[string]string{}
		default:
			k, v, ok := strings.Cut(l, "=")
			require.True(t, ok && sec != "", "%s:%d: %q", file, i+1, l)
			out[sec][strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return out
}

func TestEveryExampleIsTested(t *testing.T) {
	tested := map[string]bool{"docker/compose.yaml": true, "doc.go": true,
		"kubernetes/c-node-memlock/containerd-memlock.conf": true, "kubernetes/c-node-memlock/crio-memlock.conf": true,
		"kubernetes/c-node-memlock/crio-ulimits.conf": true,
		"kubernetes/d-nri-ulimit/containerd-nri.toml": true,
		// The trap, kept for lint (TestExamplesLint and docs/lint.md).
		"kubernetes/seed-trap.yaml": true}
	for _, m := range manifests {
		tested[m.file] = true
	}
	for _, s := range scripts {
		tested[s] = true
	}
	for _, f := range failFastExamples {
		tested[f] = true
	}
	err := filepath.WalkDir(".", func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(p, "_test.go") {
			return err
		}
		assert.True(t, tested[p], "%s has no test", p)
		return nil
	})
	require.NoError(t, err)
}
