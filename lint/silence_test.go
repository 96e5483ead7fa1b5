package lint

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// silenceJob is a PyTorchJob whose Master and Worker run the trap (an
// error and a warning each); meta and master/worker are the object's and
// the templates' metadata.
func silenceJob(meta, master, worker string) string {
	tmpl := func(meta string) string {
		return `      template:
        metadata:
          annotations: {` + meta + `}
        spec:
          securityContext: {runAsUser: 1000, runAsNonRoot: true}
          containers:
            - name: trainer
              image: trainer:1
              command: ["torchrun", "train.py"]
              securityContext:
                capabilities: {drop: [ALL], add: [IPC_LOCK]}
              resources: {limits: {nvidia.com/gpu: 8}}
              volumeMounts: [{name: dshm, mountPath: /dev/shm}]
          volumes: [{name: dshm, emptyDir: {medium: Memory}}]
`
	}
	return `apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: pj
  annotations: {` + meta + `}
spec:
  pytorchReplicaSpecs:
    Master:
` + tmpl(master) + `    Worker:
` + tmpl(worker)
}

const silenceCompose = `x-ncclrun-ignore: {shm-default: "the image sets its own /dev/shm"}
services:
  a:
    image: trainer:1
    user: "1000:1000"
    cap_add: [IPC_LOCK]
    entrypoint: ["torchrun", "train.py"]
    gpus: all
    x-ncclrun-ignore:
      ipc-lock-inert: "the node's limit is unlimited"
  b:
    image: trainer:1
    user: "1000:1000"
    cap_add: [IPC_LOCK]
    entrypoint: ["torchrun", "train.py"]
    gpus: all
`

// TestSilence: ignore-check.ncclrun.io/<id> on an object's metadata
// silences the id in every pod template of the object, on a template's
// metadata in that template only; Compose's x-ncclrun-ignore on a service
// in that service, at the top of the file in every service. A silenced
// finding is kept with the annotation and its reason and counts for
// nothing.
func TestSilence(t *testing.T) {
	cases := []struct {
		name, data string
		want       []string // id@object:container[=reason] in report order, = only when silenced
		failsAt    string   // the least severity that still fails, "" none
	}{
		{"none", silenceJob("", "", ""),
			[]string{"ipc-lock-inert@PyTorchJob/pj", "pod-security@PyTorchJob/pj", "ipc-lock-inert@PyTorchJob/pj", "pod-security@PyTorchJob/pj"}, Error},
		{"object", silenceJob(`ignore-check.ncclrun.io/pod-security: "the namespace is privileged"`, "", ""),
			[]string{"ipc-lock-inert@PyTorchJob/pj", "pod-security@PyTorchJob/pj=the namespace is privileged", "ipc-lock-inert@PyTorchJob/pj", "pod-security@PyTorchJob/pj=the namespace is privileged"}, Error},
		{"one template", silenceJob("", "", `ignore-check.ncclrun.io/ipc-lock-inert: "the node's limit is unlimited"`),
			[]string{"ipc-lock-inert@PyTorchJob/pj", "pod-security@PyTorchJob/pj", "ipc-lock-inert@PyTorchJob/pj=the node's limit is unlimited", "pod-security@PyTorchJob/pj"}, Error},
		{"object and templates", silenceJob(`ignore-check.ncclrun.io/pod-security: "privileged namespace"`, `ignore-check.ncclrun.io/ipc-lock-inert: "a"`, `ignore-check.ncclrun.io/ipc-lock-inert: ""`),
			[]string{"ipc-lock-inert@PyTorchJob/pj=a", "pod-security@PyTorchJob/pj=privileged namespace", "ipc-lock-inert@PyTorchJob/pj=", "pod-security@PyTorchJob/pj=privileged namespace"}, ""},
		{"the template's reason wins", silenceJob(`ignore-check.ncclrun.io/pod-security: "object"`, `ignore-check.ncclrun.io/pod-security: "template"`, ""),
			[]string{"ipc-lock-inert@PyTorchJob/pj", "pod-security@PyTorchJob/pj=template", "ipc-lock-inert@PyTorchJob/pj", "pod-security@PyTorchJob/pj=object"}, Error},
		{"another id, another domain, a bare prefix", silenceJob(`ignore-check.ncclrun.io/pod-securty: "typo", ignore-check.kube-linter.io/pod-security: "kube-linter's", "ignore-check.ncclrun.io/": "x"`, "", ""),
			[]string{"ipc-lock-inert@PyTorchJob/pj", "pod-security@PyTorchJob/pj", "ipc-lock-inert@PyTorchJob/pj", "pod-security@PyTorchJob/pj"}, Error},
		{"errors silenced, warnings left", silenceJob(`ignore-check.ncclrun.io/ipc-lock-inert: "entrypoint"`, "", ""),
			[]string{"ipc-lock-inert@PyTorchJob/pj=entrypoint", "pod-security@PyTorchJob/pj", "ipc-lock-inert@PyTorchJob/pj=entrypoint", "pod-security@PyTorchJob/pj"}, Warning},
		{"pod-level finding", `apiVersion: v1
kind: Pod
metadata:
  name: p
  annotations:
    ignore-check.ncclrun.io/pod-capabilities: "a validating webhook moves them"
    ignore-check.ncclrun.io/nri-annotation: "checked on the node"
    ulimits.noderesource.dev/container.train: '[{type: RLIMIT_MEMLOCK, soft: 1, hard: 1}]'
spec:
  securityContext:
    capabilities: {add: [IPC_LOCK]}
  containers:
    - {name: trainer, image: trainer:1}
`, []string{"pod-capabilities@Pod/p=a validating webhook moves them", "nri-annotation@Pod/p=checked on the node"}, ""},
		{"a workload's misplaced annotation", `apiVersion: batch/v1
kind: Job
metadata:
  name: j
  annotations:
    ignore-check.ncclrun.io/nri-annotation: "a mutating webhook copies it"
    ulimits.noderesource.dev/container.trainer: '[{type: RLIMIT_MEMLOCK, soft: 18446744073709551615, hard: 18446744073709551615}]'
spec:
  template:
    spec:
      containers:
        - {name: trainer, image: trainer:1}
`, []string{"nri-annotation@Job/j=a mutating webhook copies it"}, ""},
		{"compose", silenceCompose,
			[]string{"shm-default@service/a=the image sets its own /dev/shm", "ipc-lock-inert@service/a=the node's limit is unlimited", "shm-default@service/b=the image sets its own /dev/shm", "ipc-lock-inert@service/b"}, Error},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := CheckBytes("in.yaml", []byte(tc.data))
			require.NoError(t, err)
			var got []string
			for _, f := range rep.Findings {
				s := f.ID + "@" + f.Object
				if f.Silenced != nil {
					s += "=" + f.Silenced.Reason
					assert.True(t, strings.HasPrefix(f.Silenced.By, IgnoreAnnotation+f.ID) || f.Silenced.By == IgnoreExtension+"."+f.ID, f.Silenced.By)
				}
				got = append(got, s)
			}
			assert.Equal(t, tc.want, got)
			for _, sev := range []string{Error, Warning, Info} {
				fails, err := rep.FailsAt(sev)
				require.NoError(t, err)
				want := tc.failsAt != "" && (sev == Info || sev == Warning && tc.failsAt != Info || sev == tc.failsAt)
				assert.Equal(t, want, fails, "--fail-on %s", sev)
			}
		})
	}
}

// TestSilencedOutput: text leaves a silenced finding out and counts it;
// json keeps it with "silenced"; sarif keeps it with an inSource
// suppression whose justification is the reason.
func TestSilencedOutput(t *testing.T) {
	rep, err := CheckBytes("job.yaml", []byte(silenceJob(`ignore-check.ncclrun.io/pod-security: "the namespace is privileged"`, "", "")))
	require.NoError(t, err)

	var b bytes.Buffer
	require.NoError(t, WriteText(&b, rep))
	assert.NotContains(t, b.String(), "pod-security")
	assert.Contains(t, b.String(), "2 containers checked: 2 error(s), 0 warning(s), 0 info (2 silenced by annotation)\n")

	all, err := CheckBytes("job.yaml", []byte(silenceJob(`ignore-check.ncclrun.io/pod-security: "p", ignore-check.ncclrun.io/ipc-lock-inert: "i"`, "", "")))
	require.NoError(t, err)
	b.Reset()
	require.NoError(t, WriteText(&b, all))
	assert.Equal(t, "2 containers checked, no finding (4 silenced by annotation)\n", b.String())

	b.Reset()
	require.NoError(t, WriteJSON(&b, rep))
	var js struct {
		Findings []map[string]any `json:"findings"`
	}
	require.NoError(t, json.Unmarshal(b.Bytes(), &js))
	require.Len(t, js.Findings, 4)
	assert.Nil(t, js.Findings[0]["silenced"])
	assert.Equal(t, map[string]any{"by": "ignore-check.ncclrun.io/pod-security", "reason": "the namespace is privileged"}, js.Findings[1]["silenced"])

	b.Reset()
	require.NoError(t, WriteSARIF(&b, rep, "v1"))
	var s struct {
		Runs []struct {
			Results []struct {
				RuleID       string           `json:"ruleId"`
				Suppressions []map[string]any `json:"suppressions"`
			} `json:"results"`
		} `json:"runs"`
	}
	require.NoError(t, json.Unmarshal(b.Bytes(), &s))
	res := s.Runs[0].Results
	require.Len(t, res, 4)
	assert.Empty(t, res[0].Suppressions)
	assert.Equal(t, "pod-security", res[1].RuleID)
	assert.Equal(t, []map[string]any{{"kind": "inSource", "justification": "the namespace is privileged"}}, res[1].Suppressions)
}
