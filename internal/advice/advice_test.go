package advice

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEveryFixHasATextForEveryPlatform(t *testing.T) {
	for _, f := range []Fix{RaiseMemlock, Ambient, RootUser, AddIPCLock, AddSetid, ExecForm, ShmSize, PodMemlock, UserNamespace, PrivilegedNamespace, DriverUpgrade, FabricManager, SlurmdMemlock, SlurmPropagation} {
		for _, p := range Platforms {
			assert.NotEmpty(t, Text(f, p, Who{UID: 1000, GID: 1000}), "%s on %s", f, p)
		}
	}
	assert.Empty(t, Text("nope", Host, Who{}))
}

// TestSlurmFixes: the two Slurm sources' fixes are given in slurm.conf's
// and systemd's words.
func TestSlurmFixes(t *testing.T) {
	slurmd := Text(SlurmdMemlock, Slurm, Who{})
	assert.Contains(t, slurmd, "`LimitMEMLOCK=infinity`")
	assert.Contains(t, slurmd, "`systemctl restart slurmd`")
	assert.Contains(t, slurmd, "`PropagateResourceLimitsExcept=MEMLOCK`")
	prop := Text(SlurmPropagation, Slurm, Who{})
	assert.Contains(t, prop, "`PropagateResourceLimitsExcept=MEMLOCK`")
	assert.Contains(t, prop, "`scontrol show config | grep -i propagate`")
	assert.Contains(t, prop, "`srun --propagate=NONE`")
}

func TestWho(t *testing.T) {
	assert.Contains(t, Text(Ambient, Kubernetes, Who{UID: 1000, GID: 100}), "ncclrun --user=1000:100")
	assert.Contains(t, Text(Ambient, Kubernetes, Who{Unknown: true}), "ncclrun --user=UID:GID")
}

func TestExpand(t *testing.T) {
	got, err := Expand("Raise it. {advice:raise-memlock}. Done.")
	require.NoError(t, err)
	assert.Contains(t, got, "Docker: start the container with `docker run --ulimit memlock=-1:-1`")
	assert.Contains(t, got, "Slurm: set `PropagateResourceLimitsExcept=MEMLOCK`")
	assert.Contains(t, got, "hosts: set `* soft memlock unlimited`")
	got, err = Expand("{advice:ambient}")
	require.NoError(t, err)
	assert.Contains(t, got, "; Slurm, hosts: `setcap cap_ipc_lock+p` on the ncclrun binary", "one text for platforms that share it")
	_, err = Expand("{advice:bogus}")
	assert.ErrorContains(t, err, `"bogus"`)
	got, err = Expand("no placeholder")
	require.NoError(t, err)
	assert.Equal(t, "no placeholder", got)
}

// The per-pod way names the NRI ulimit-adjuster, its
// annotation and what the node needs.
func TestPodMemlockNamesNRI(t *testing.T) {
	k := Text(PodMemlock, Kubernetes, Who{})
	for _, w := range []string{"baseline", "restricted", "ulimit-adjuster", "DaemonSet", "ulimits.noderesource.dev/container.<container name>",
		"RLIMIT_MEMLOCK", "18446744073709551615", "containerd >= 1.7", "CRI-O >= 1.26", "examples/kubernetes/d-nri-ulimit/"} {
		assert.Contains(t, k, w)
	}
}

// TestCRIOUlimits: under CRI-O with the systemd cgroup manager the advice
// is CRI-O's own default_ulimits first, checked with doctor in the pod.
func TestCRIOUlimits(t *testing.T) {
	for _, p := range Platforms {
		k := Text(CRIOUlimits, p, Who{})
		for _, w := range []string{`default_ulimits = ["memlock=-1:-1"]`, "[crio.runtime]", "/etc/crio/crio.conf", "systemd cgroup manager",
			"DefaultLimitMEMLOCK", "crio.service's LimitMEMLOCK", "cri-o/cri-o#10006", "`ncclrun doctor` in a new pod"} {
			assert.Contains(t, k, w, p)
		}
	}
	got, err := Expand("{advice:crio-ulimits}")
	require.NoError(t, err)
	assert.Contains(t, got, "default_ulimits")
}

// TestNRIBeforePrivilegedNamespace: where a text offers Pod Security's
// escape (a namespace at the privileged level), the NRI annotation, which
// needs no capability and is admitted under restricted, comes first.
func TestNRIBeforePrivilegedNamespace(t *testing.T) {
	for _, p := range Platforms {
		txt := Text(PrivilegedNamespace, p, Who{})
		nri, label := strings.Index(txt, "ulimit-adjuster"), strings.Index(txt, "enforce: privileged")
		require.True(t, nri >= 0 && label >= 0, txt)
		assert.Less(t, nri, label, p)
	}
}
