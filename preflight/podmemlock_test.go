package preflight

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
)

// In a pod, doctor's memlock fix gives the way that needs
// no capability (Pod Security baseline and restricted namespaces): the
// per-pod limit from NRI's ulimit-adjuster, besides LimitMEMLOCK=infinity
// on the node. Docker and hosts are not told about pod annotations.
func TestMemlockFixNamesPodLimitOnKubernetes(t *testing.T) {
	for _, tc := range []struct {
		tree string
		env  []string
		nri  bool
	}{
		{"k8s-trap", nil, true},           // uid 1000, IPC_LOCK in bounding only
		{"k8s-cgroup-only", nil, true},    // the same, known by its cgroup alone
		{"nnp", nil, true},                // no_new_privs
		{"docker-root", nil, false},       // Docker
		{"k8s-kubelet-mounts", nil, true}, // cgroup v2 namespace, kubelet mounts
	} {
		t.Run(tc.tree, func(t *testing.T) {
			r := Run(context.Background(), Options{Root: "testdata/" + tc.tree, Env: append([]string{}, tc.env...), MinMemlock: DefaultMinMemlock})
			got, _ := r.Check(IDMemlock)
			if !assert.Equal(t, Fail, got.Status, "%s: %s", tc.tree, got.Summary) {
				return
			}
			if tc.nri {
				assert.Contains(t, got.Fix, "LimitMEMLOCK=infinity")
				assert.Contains(t, got.Fix, "ulimits.noderesource.dev/container.<container name>")
				assert.Contains(t, got.Fix, "ulimit-adjuster")
			} else {
				assert.NotContains(t, got.Fix, "ulimit-adjuster")
			}
		})
	}
}
