package examples_test

import (
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// Pod Security Admission levels (kubernetes.io/docs/concepts/security/pod-security-standards).
const (
	psaPrivileged = "privileged"
	psaBaseline   = "baseline"
	psaRestricted = "restricted"
)

// baselineCaps are the capabilities the baseline level lets a container add.
var baselineCaps = []string{"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
	"NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}

// restrictedVolume reports whether the restricted level admits a volume.
func restrictedVolume(v corev1.Volume) bool {
	s := v.VolumeSource
	return s.EmptyDir != nil || s.ConfigMap != nil || s.Secret != nil || s.Projected != nil || s.DownwardAPI != nil ||
		s.CSI != nil || s.Ephemeral != nil || s.PersistentVolumeClaim != nil
}

// podSecurityLevel is the strictest Pod Security level that admits spec,
// with the reasons it is not stricter. It checks what these examples can
// get wrong (host namespaces and paths, privileged, capabilities,
// privilege escalation, non-root, seccomp, volume types), not every rule.
func podSecurityLevel(spec corev1.PodSpec) (string, []string) {
	var notBaseline, notRestricted []string
	if spec.HostNetwork || spec.HostPID || spec.HostIPC {
		notBaseline = append(notBaseline, "host namespaces")
	}
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			notBaseline = append(notBaseline, "hostPath volume "+v.Name)
		}
		if !restrictedVolume(v) {
			notRestricted = append(notRestricted, "volume type of "+v.Name)
		}
	}
	podSC := spec.SecurityContext
	if podSC == nil {
		podSC = &corev1.PodSecurityContext{}
	}
	for _, c := range append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...) {
		sc := c.SecurityContext
		if sc == nil {
			sc = &corev1.SecurityContext{}
		}
		if sc.Privileged != nil && *sc.Privileged {
			notBaseline = append(notBaseline, c.Name+": privileged")
		}
		var add, drop []string
		if sc.Capabilities != nil {
			for _, a := range sc.Capabilities.Add {
				add = append(add, strings.TrimPrefix(string(a), "CAP_"))
			}
			for _, d := range sc.Capabilities.Drop {
				drop = append(drop, string(d))
			}
		}
		for _, a := range add {
			if !slices.Contains(baselineCaps, a) {
				notBaseline = append(notBaseline, c.Name+": adds "+a)
			}
			if a != "NET_BIND_SERVICE" {
				notRestricted = append(notRestricted, c.Name+": adds "+a)
			}
		}
		if !slices.Contains(drop, "ALL") {
			notRestricted = append(notRestricted, c.Name+": does not drop ALL")
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			notRestricted = append(notRestricted, c.Name+": allowPrivilegeEscalation is not false")
		}
		nonRoot := sc.RunAsNonRoot
		if nonRoot == nil {
			nonRoot = podSC.RunAsNonRoot
		}
		if nonRoot == nil || !*nonRoot {
			notRestricted = append(notRestricted, c.Name+": runAsNonRoot is not true")
		}
		uid := sc.RunAsUser
		if uid == nil {
			uid = podSC.RunAsUser
		}
		if uid != nil && *uid == 0 {
			notRestricted = append(notRestricted, c.Name+": runAsUser 0")
		}
		seccomp := sc.SeccompProfile
		if seccomp == nil {
			seccomp = podSC.SeccompProfile
		}
		switch {
		case seccomp != nil && seccomp.Type == corev1.SeccompProfileTypeUnconfined:
			notBaseline = append(notBaseline, c.Name+": seccomp Unconfined")
		case seccomp == nil:
			notRestricted = append(notRestricted, c.Name+": no seccompProfile (RuntimeDefault or Localhost)")
		}
	}
	switch {
	case len(notBaseline) > 0:
		return psaPrivileged, notBaseline
	case len(notRestricted) > 0:
		return psaBaseline, notRestricted
	}
	return psaRestricted, nil
}

// psaLevels is the Pod Security level each manifest needs; a manifest that
// needs `privileged` must say so in its comments.
var psaLevels = map[string]string{
	"kubernetes/a-root-drop-to-user.yaml": psaPrivileged,
	"kubernetes/b-nonroot-filecap.yaml":   psaPrivileged,
	"kubernetes/c-node-memlock/pod.yaml":  psaBaseline,
	"kubernetes/d-nri-ulimit/pod.yaml":    psaRestricted,
	"kubernetes/pytorchjob.yaml":          psaPrivileged,
	"kubernetes/jobset.yaml":              psaPrivileged,
	"kubernetes/mpijob.yaml":              psaPrivileged,
}

func TestPodSecurityLevels(t *testing.T) {
	for _, m := range manifests {
		t.Run(m.file, func(t *testing.T) {
			want, ok := psaLevels[m.file]
			require.True(t, ok, "%s: no Pod Security level stated in psaLevels", m.file)
			data, err := os.ReadFile(m.file)
			require.NoError(t, err)
			// The namespace must admit every pod template: the least strict
			// level among them.
			rank := map[string]int{psaRestricted: 0, psaBaseline: 1, psaPrivileged: 2}
			got, why := psaRestricted, map[string][]string{}
			for name, spec := range decode(t, m.kind, data) {
				lvl, w := podSecurityLevel(spec)
				why[name] = w
				if rank[lvl] > rank[got] {
					got = lvl
				}
			}
			assert.Equal(t, want, got, "%s: Pod Security level its namespace needs (per template, why not stricter: %v)", m.file, why)
			if want == psaPrivileged {
				assert.Contains(t, string(data), "`privileged` level", "%s must say it needs a privileged namespace", m.file)
			}
		})
	}
}

// TestPodSecurityLevelCatchesIPCLock: the check can fail.
func TestPodSecurityLevelCatchesIPCLock(t *testing.T) {
	f := false
	tr := true
	spec := corev1.PodSpec{
		SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: &tr, SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
		Containers: []corev1.Container{{Name: "c", SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: &f, Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}}},
	}
	lvl, _ := podSecurityLevel(spec)
	assert.Equal(t, psaRestricted, lvl)
	spec.Containers[0].SecurityContext.Capabilities.Add = []corev1.Capability{"NET_BIND_SERVICE"}
	lvl, _ = podSecurityLevel(spec)
	assert.Equal(t, psaRestricted, lvl)
	spec.Containers[0].SecurityContext.Capabilities.Add = []corev1.Capability{"SETUID"}
	lvl, _ = podSecurityLevel(spec)
	assert.Equal(t, psaBaseline, lvl)
	spec.Containers[0].SecurityContext.Capabilities.Add = []corev1.Capability{"IPC_LOCK"}
	lvl, why := podSecurityLevel(spec)
	assert.Equal(t, psaPrivileged, lvl)
	assert.Contains(t, why, "c: adds IPC_LOCK")
}

// ulimitEntry is one element of the ulimit-adjuster's annotation value.
type ulimitEntry struct {
	Type string `json:"type"`
	Soft uint64 `json:"soft"`
	Hard uint64 `json:"hard"`
}

// TestNRIUlimitAnnotation checks d-nri-ulimit/pod.yaml as the
// ulimit-adjuster plugin reads it: the annotation key names the pod's
// container, its value is a YAML list of {type, soft, hard} with unsigned
// 64-bit values, hard >= soft, and RLIMIT_MEMLOCK is at least the 1 GiB
// doctor asks for (18446744073709551615 is unlimited).
func TestNRIUlimitAnnotation(t *testing.T) {
	data, err := os.ReadFile("kubernetes/d-nri-ulimit/pod.yaml")
	require.NoError(t, err)
	var p corev1.Pod
	require.NoError(t, yaml.UnmarshalStrict(data, &p))
	const prefix = "ulimits.noderesource.dev/container."
	found := 0
	for k, v := range p.Annotations {
		name, ok := strings.CutPrefix(k, prefix)
		if !ok {
			continue
		}
		found++
		assert.True(t, slices.ContainsFunc(p.Spec.Containers, func(c corev1.Container) bool { return c.Name == name }),
			"annotation %s names no container of the pod", k)
		var list []ulimitEntry
		require.NoError(t, yaml.UnmarshalStrict([]byte(v), &list), "annotation value: a YAML list of {type, soft, hard}")
		require.NotEmpty(t, list)
		memlock := false
		for _, e := range list {
			assert.True(t, strings.HasPrefix(e.Type, "RLIMIT_"), "type %q", e.Type)
			assert.GreaterOrEqual(t, e.Hard, e.Soft, "%s: hard >= soft", e.Type)
			if e.Type == "RLIMIT_MEMLOCK" {
				memlock = true
				assert.True(t, e.Soft == math.MaxUint64 || e.Soft >= 1<<30, "RLIMIT_MEMLOCK soft %d: unlimited or >= 1 GiB", e.Soft)
			}
		}
		assert.True(t, memlock, "the annotation sets RLIMIT_MEMLOCK")
		// The unlimited value is written out in full: no float rounding.
		assert.Contains(t, v, strconv.FormatUint(math.MaxUint64, 10))
	}
	assert.Equal(t, 1, found, "one ulimit-adjuster annotation")
	for _, c := range p.Spec.Containers {
		add, _ := caps(c)
		assert.Empty(t, add, "%s: no capability added", c.Name)
	}
}

func TestNRINamespaceAndContainerdConfig(t *testing.T) {
	pod, err := os.ReadFile("kubernetes/d-nri-ulimit/pod.yaml")
	require.NoError(t, err)
	var p corev1.Pod
	require.NoError(t, yaml.UnmarshalStrict(pod, &p))
	require.NotEmpty(t, p.Namespace)
	assert.Contains(t, string(pod), "kubectl label namespace "+p.Namespace+" pod-security.kubernetes.io/enforce="+psaRestricted,
		"the pod says how to put its namespace at the level it passes")

	assert.Equal(t, map[string]map[string]string{`plugins."io.containerd.nri.v1.nri"`: {
		"disable": "false", "socket_path": `"/var/run/nri/nri.sock"`,
		"plugin_path": `"/opt/nri/plugins"`, "plugin_config_path": `"/etc/nri/conf.d"`,
	}}, parseINI(t, "kubernetes/d-nri-ulimit/containerd-nri.toml"))
}
