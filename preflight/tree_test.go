package preflight

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// overlay copies testdata/<tree> to a temporary directory and writes files
// (relative path -> content) over it.
func overlay(t *testing.T, tree string, files map[string]string) string {
	t.Helper()
	dst := t.TempDir()
	src := filepath.Join("testdata", tree)
	require.NoError(t, filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	}))
	for rel, content := range files {
		p := filepath.Join(dst, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	return dst
}

func statuses(r Report) map[string]Status {
	m := map[string]Status{}
	for _, c := range r.Checks {
		m[c.ID] = c.Status
	}
	return m
}

func rule(t *testing.T, r Report) string {
	t.Helper()
	c, ok := r.Check(IDMemlock)
	require.True(t, ok)
	s, _ := c.Details["rule"].(string)
	return s
}

func TestTrees(t *testing.T) {
	all := func(m map[string]Status) map[string]Status {
		base := map[string]Status{IDEnvironment: OK, IDMemlock: OK, IDCapabilities: OK, IDRDMA: OK,
			IDShm: OK, IDGPU: OK, IDGPUDirect: OK, IDNetwork: OK, IDEnvSanity: OK}
		for k, v := range m {
			base[k] = v
		}
		return base
	}
	cases := []struct {
		tree     string
		env      []string
		kind     Platform
		statuses map[string]Status
		rule     string
		via      string
		suggest  []EnvSuggestion
		// min is --min-memlock: given, memlock is judged without an RDMA
		// device too (TestNoRDMANotJudged has these trees without it).
		min int64
	}{
		{tree: "ib-node", kind: "host", statuses: all(nil), rule: ruleUnlimited, via: "inherited"},
		{tree: "roce-node", kind: "docker", statuses: all(nil), rule: ruleUnlimited, via: "inherited"},
		{tree: "port-down", kind: "host", statuses: all(map[string]Status{IDRDMA: Warn}), rule: ruleUnlimited, via: "inherited",
			suggest: []EnvSuggestion{{Name: "NCCL_IB_HCA", Value: "=mlx5_0:1,mlx5_2:1,mlx5_3:1",
				Reason: "sysfs shows HCA ports that are not usable here (mlx5_1:1: no verbs node or port not ACTIVE); limiting NCCL to mlx5_0:1, mlx5_2:1, mlx5_3:1"}}},
		{tree: "missing-uverbs", kind: "kubernetes", statuses: all(map[string]Status{IDRDMA: Warn}), rule: ruleUnlimited, via: "inherited",
			suggest: []EnvSuggestion{{Name: "NCCL_IB_HCA", Value: "=mlx5_0:1,mlx5_1:1",
				Reason: "sysfs shows HCA ports that are not usable here (mlx5_2:1, mlx5_3:1: no verbs node or port not ACTIVE); limiting NCCL to mlx5_0:1, mlx5_1:1"}}},
		{tree: "shm-64m", kind: "docker", statuses: all(map[string]Status{IDShm: Fail, IDRDMA: Skip, IDGPUDirect: Skip}), rule: ruleUnlimited, via: "inherited"},
		{tree: "no-peermem", kind: "host", statuses: all(map[string]Status{IDGPUDirect: Warn}), rule: ruleUnlimited, via: "inherited"},
		{tree: "k8s-trap", kind: "kubernetes", statuses: all(map[string]Status{IDMemlock: Fail, IDCapabilities: Warn, IDShm: OK}), rule: ruleK8sTrap, via: "none"},
		{tree: "docker-root", kind: "docker", statuses: all(map[string]Status{IDMemlock: Fail, IDCapabilities: Warn, IDShm: Skip, IDRDMA: Skip, IDGPU: Skip, IDGPUDirect: Skip}), rule: ruleRootNoIPCLock, via: "none", min: DefaultMinMemlock},
		{tree: "slurm", env: []string{"SLURM_JOB_ID=42", "SLURM_PROCID=0"}, kind: "slurm", statuses: all(map[string]Status{IDRDMA: Skip, IDGPUDirect: Skip}), rule: ruleUnlimited, via: "none"},
		{tree: "userns", kind: "docker", statuses: all(map[string]Status{IDMemlock: Fail, IDCapabilities: Warn, IDShm: Skip, IDRDMA: Skip, IDGPU: Skip, IDGPUDirect: Skip}), rule: ruleUserNS, via: "none", min: DefaultMinMemlock},
		{tree: "vm-root", kind: "host", statuses: all(map[string]Status{IDShm: Skip, IDGPU: Skip, IDGPUDirect: Skip}), rule: ruleUnlimited, via: "inherited"},
		{tree: "nnp", kind: "kubernetes", statuses: all(map[string]Status{IDMemlock: Fail, IDCapabilities: Warn, IDShm: Skip, IDRDMA: Skip, IDGPU: Skip, IDGPUDirect: Skip}), rule: ruleK8sTrap, via: "none", min: DefaultMinMemlock},
		{tree: "garbled", kind: "host", statuses: map[string]Status{IDEnvironment: OK, IDMemlock: Warn, IDCapabilities: Warn, IDRDMA: Fail, IDShm: Warn, IDGPU: OK, IDGPUDirect: Warn, IDNetwork: Fail, IDEnvSanity: OK}, rule: ruleUnknown, via: "none"},
	}
	for _, tc := range cases {
		t.Run(tc.tree, func(t *testing.T) {
			env := tc.env
			if env == nil {
				env = []string{}
			}
			r := Run(context.Background(), Options{Root: filepath.Join("testdata", tc.tree), Env: env, MinMemlock: tc.min})
			assert.Equal(t, tc.kind, r.Environment.Kind, r.Environment.Reason)
			assert.Equal(t, tc.statuses, statuses(r))
			assert.Equal(t, tc.rule, rule(t, r))
			assert.Equal(t, tc.via, r.Command.Via)
			assert.Equal(t, tc.suggest, SuggestEnv(r))
			for _, c := range r.Checks {
				assert.NotEmpty(t, c.Summary, c.ID)
				if c.Status == Fail {
					assert.NotEmpty(t, c.Fix, "%s fails without a fix", c.ID)
				}
			}
		})
	}
}

// TestTreeResults compares whole results where the details are the
// contract (docs/contract.md rdma.details.devices, shm.details, memlock.details).
func TestTreeResults(t *testing.T) {
	port := func(rate string) []RDMAPort {
		return []RDMAPort{{Port: 1, State: "ACTIVE", PhysState: "LinkUp", LinkLayer: "InfiniBand", Rate: rate}}
	}
	t.Run("ib-node rdma", func(t *testing.T) {
		r := Run(context.Background(), Options{Root: "testdata/ib-node", Env: []string{}})
		got, _ := r.Check(IDRDMA)
		want := Result{ID: IDRDMA, Status: OK,
			Summary: "4 RDMA device(s), all usable: mlx5_0:1, mlx5_1:1, mlx5_2:1, mlx5_3:1",
			Details: map[string]any{"rdma_cm": true, "devices": []RDMADevice{
				{Name: "mlx5_0", Uverbs: "uverbs0", UverbsPresent: true, Ports: port("400 Gb/sec (4X NDR)")},
				{Name: "mlx5_1", Uverbs: "uverbs1", UverbsPresent: true, Ports: port("400 Gb/sec (4X NDR)")},
				{Name: "mlx5_2", Uverbs: "uverbs2", UverbsPresent: true, Ports: port("400 Gb/sec (4X NDR)")},
				{Name: "mlx5_3", Uverbs: "uverbs3", UverbsPresent: true, Ports: port("400 Gb/sec (4X NDR)")},
			}}}
		assert.Equal(t, want, got)
	})
	t.Run("missing-uverbs rdma", func(t *testing.T) {
		r := Run(context.Background(), Options{Root: "testdata/missing-uverbs", Env: []string{}})
		got, _ := r.Check(IDRDMA)
		assert.Equal(t, Warn, got.Status)
		assert.Equal(t, "RDMA device(s) mlx5_2, mlx5_3 have no verbs node in /dev/infiniband; NCCL can use mlx5_0:1, mlx5_1:1", got.Summary)
		assert.Contains(t, got.Fix, "rdma/")
		devs := got.Details["devices"].([]RDMADevice)
		assert.Equal(t, RDMADevice{Name: "mlx5_2", Uverbs: "uverbs2", UverbsError: "dev/infiniband/uverbs2 does not exist", Ports: port("400 Gb/sec (4X NDR)")}, devs[2])
	})
	t.Run("shm-64m", func(t *testing.T) {
		r := Run(context.Background(), Options{Root: "testdata/shm-64m", Env: []string{}})
		got, _ := r.Check(IDShm)
		assert.Equal(t, Result{ID: IDShm, Status: Fail,
			Summary: "/dev/shm is 64 MiB (the container default) and cannot hold the about 1.0 GiB NCCL's SHM transport needs for 8 local GPUs",
			Fix:     shmFix("docker"),
			Details: map[string]any{"size_bytes": int64(64 << 20), "source": "proc/self/mountinfo", "estimate_bytes": int64(8 * 7 * 2 * 9637888), "gpus": 8, "recommended_bytes": int64(1 << 30)}}, got)
	})
	t.Run("shm without a GPU", func(t *testing.T) {
		// No GPU in the tree: the size is reported, never judged against
		// GPUs that are not there.
		r := Run(context.Background(), Options{Root: "testdata/docker-root", Env: []string{}})
		got, _ := r.Check(IDShm)
		assert.Equal(t, Result{ID: IDShm, Status: Skip,
			Summary: "/dev/shm is 64 MiB; no local GPU found, so NCCL's SHM transport needs none of it here",
			Details: map[string]any{"size_bytes": int64(64 << 20), "source": "proc/self/mountinfo", "gpus": 0, "recommended_bytes": int64(1 << 30)}}, got)
	})
	t.Run("k8s-trap memlock", func(t *testing.T) {
		r := Run(context.Background(), Options{Root: "testdata/k8s-trap", Env: []string{}})
		got, _ := r.Check(IDMemlock)
		assert.Equal(t, "RLIMIT_MEMLOCK is 64 KiB (soft=hard) and CAP_IPC_LOCK is in the bounding set only for uid 1000: NCCL cannot register memory (ibv_reg_mr fails with Cannot allocate memory)", got.Summary)
		assert.Contains(t, got.Fix, "runAsUser: 0")
		assert.Contains(t, got.Fix, "add: [IPC_LOCK, SETUID, SETGID]")
		assert.Contains(t, got.Fix, "ncclrun --user=1000:1000")
		assert.Contains(t, got.Fix, "setcap cap_ipc_lock+p")
		assert.Contains(t, got.Fix, "LimitMEMLOCK=infinity")
		assert.Equal(t, map[string]any{"soft": int64(65536), "hard": int64(65536), "soft_before": int64(65536), "hard_before": int64(65536),
			"min_bytes": DefaultMinMemlock, "rule": ruleK8sTrap}, got.Details)
		caps, _ := r.Check(IDCapabilities)
		assert.Equal(t, CapSets{Bounding: true}, caps.Details["ipc_lock"])
		assert.Equal(t, 1000, caps.Details["uid"])
		assert.Equal(t, false, caps.Details["no_new_privs"])
		assert.Equal(t, CommandState{UID: 1000, GID: 1000, Via: "none", Memlock: Rlimit{Soft: 65536, Hard: 65536}, MemlockKnown: true}, caps.Details["command"])
	})
	t.Run("slurm raise simulated", func(t *testing.T) {
		r := Run(context.Background(), Options{Root: "testdata/slurm", Env: []string{"SLURM_JOB_ID=1"}})
		got, _ := r.Check(IDMemlock)
		assert.Equal(t, OK, got.Status)
		assert.Equal(t, "RLIMIT_MEMLOCK is unlimited (soft=hard): NCCL can register memory (raised from 64 KiB (soft; hard unlimited))", got.Summary)
		assert.Equal(t, int64(65536), got.Details["soft_before"])
		assert.Equal(t, Unlimited, got.Details["soft"])
		assert.Equal(t, Unlimited, got.Details["hard_before"])
	})
	t.Run("vm-root hard raise simulated", func(t *testing.T) {
		// Root with CAP_SYS_RESOURCE in the initial user namespace: the
		// live raise lifts the hard limit too, and so does the prediction.
		r := Run(context.Background(), Options{Root: "testdata/vm-root", Env: []string{}})
		got, _ := r.Check(IDMemlock)
		assert.Equal(t, OK, got.Status)
		assert.Equal(t, "RLIMIT_MEMLOCK is unlimited (soft=hard): NCCL can register memory (raised from 8 MiB (soft=hard))", got.Summary)
		assert.Equal(t, map[string]any{"soft": Unlimited, "hard": Unlimited, "soft_before": int64(8 << 20), "hard_before": int64(8 << 20),
			"min_bytes": DefaultMinMemlock, "rule": ruleUnlimited,
			"raise": "simulated: ncclrun run raises the soft and the hard limit to unlimited (the snapshot holds CAP_SYS_RESOURCE in the initial user namespace)"}, got.Details)
		assert.Equal(t, Rlimit{Soft: Unlimited, Hard: Unlimited}, r.Command.Memlock)
	})
	t.Run("nnp mentions no_new_privs", func(t *testing.T) {
		r := Run(context.Background(), Options{Root: "testdata/nnp", Env: []string{}, MinMemlock: DefaultMinMemlock})
		got, _ := r.Check(IDMemlock)
		assert.Contains(t, got.Fix, "no_new_privs")
		caps, _ := r.Check(IDCapabilities)
		assert.Equal(t, true, caps.Details["no_new_privs"])
	})
	t.Run("userns", func(t *testing.T) {
		r := Run(context.Background(), Options{Root: "testdata/userns", Env: []string{}, MinMemlock: DefaultMinMemlock})
		got, _ := r.Check(IDMemlock)
		assert.Equal(t, "RLIMIT_MEMLOCK is 8 MiB (soft=hard) in a user namespace, where capabilities neither bypass nor raise it: NCCL cannot register memory (ibv_reg_mr fails with Cannot allocate memory)", got.Summary)
		assert.Contains(t, got.Fix, "hostUsers: true")
		caps, _ := r.Check(IDCapabilities)
		assert.Equal(t, true, caps.Details["user_namespace"])
		assert.Equal(t, false, r.Command.IPCLockEffective)
	})
	t.Run("gpu", func(t *testing.T) {
		r := Run(context.Background(), Options{Root: "testdata/roce-node", Env: []string{}})
		got, _ := r.Check(IDGPU)
		assert.Equal(t, Result{ID: IDGPU, Status: OK, Summary: "4 GPU(s) (nvidia0, nvidia1, nvidia2, nvidia3), driver 570.86.15",
			Details: map[string]any{"devices": []string{"nvidia0", "nvidia1", "nvidia2", "nvidia3"}, "count": 4, "driver_gpus": 4, "driver_version": "570.86.15"}}, got)
		gd, _ := r.Check(IDGPUDirect)
		assert.Equal(t, map[string]any{"nv_mem": "1.3-0", "kernel_release": "6.8.0-49-generic", "dmabuf_kernel": true}, gd.Details)
	})
}

// TestPlans covers the launcher's plan and the remaining rows of the
// decision table on snapshot trees.
func TestPlans(t *testing.T) {
	kib64 := &Rlimit{Soft: 64 << 10, Hard: 64 << 10}
	cases := []struct {
		name      string
		tree      string
		files     map[string]string
		plan      Plan
		env       []string
		memlock   Status
		caps      Status
		rule      string
		via       string
		ambient   bool
		cmdUID    int
		summaryIn string
	}{
		{name: "limit zero", tree: "docker-root", files: withRDMA(map[string]string{"proc/self/limits": "Max locked memory 0 0 bytes\n"}),
			memlock: Fail, caps: OK, rule: ruleLimitZero, via: "none", summaryIn: "Operation not permitted (EPERM)"},
		{name: "--user from root hands IPC_LOCK over as ambient", tree: "ib-node", plan: Plan{User: "trainer", Memlock: kib64},
			memlock: OK, caps: OK, rule: ruleAmbient, via: "ambient", ambient: true, cmdUID: 1000, summaryIn: "ambient set"},
		{name: "--drop-cap IPC_LOCK", tree: "ib-node", plan: Plan{DropCaps: []string{"cap_ipc_lock"}, Memlock: kib64},
			memlock: Fail, caps: Warn, rule: ruleDropped, via: "none", summaryIn: "--drop-cap"},
		{name: "--drop-cap ALL with enough memlock", tree: "ib-node", plan: Plan{DropCaps: []string{"ALL"}, Memlock: &Rlimit{Soft: 2 << 30, Hard: 2 << 30}},
			memlock: Warn, caps: OK, rule: ruleFinite, via: "none", summaryIn: "not unlimited"},
		{name: "8 MiB without capability", tree: "docker-root", files: withRDMA(map[string]string{"proc/self/limits": "Max locked memory 8388608 8388608 bytes\n"}),
			env: []string{"KUBERNETES_SERVICE_HOST=10.0.0.1"}, memlock: Fail, caps: Warn, rule: ruleRootNoIPCLock, via: "none", summaryIn: "8 MiB"},
		{name: "unknown --user", tree: "ib-node", plan: Plan{User: "nobody"},
			memlock: OK, caps: Fail, rule: ruleUnlimited, via: "none", summaryIn: "unlimited"},
		{name: "non-root without any capability", tree: "slurm", files: withRDMA(map[string]string{"proc/self/limits": "Max locked memory 65536 65536 bytes\n"}),
			memlock: Fail, caps: OK, rule: ruleNoIPCLock, via: "none", cmdUID: 1000, summaryIn: "uid 1000 has no CAP_IPC_LOCK"},
		{name: "file capability +p on ncclrun as uid 1000", tree: "nnp", files: map[string]string{"proc/self/status": "Uid:\t1000\t1000\t1000\t1000\nGid:\t1000\t1000\t1000\t1000\nCapInh:\t0000000000000000\nCapPrm:\t0000000000004000\nCapEff:\t0000000000000000\nCapBnd:\t0000000000004000\nCapAmb:\t0000000000000000\nNoNewPrivs:\t1\n"},
			memlock: OK, caps: OK, rule: ruleAmbient, via: "ambient", ambient: true, cmdUID: 1000, summaryIn: "ambient set"},
		// Uid 1000 in a container that dropped ALL and
		// added nothing fails memlock as the trap does, and the
		// capabilities verdict follows (warn), as in the trap.
		{name: "container user without IPC_LOCK in the bounding set", tree: "nnp", files: withRDMA(map[string]string{"proc/self/status": "Uid:\t1000\t1000\t1000\t1000\nGid:\t1000\t1000\t1000\t1000\nCapInh:\t0000000000000000\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nCapBnd:\t0000000000000000\nCapAmb:\t0000000000000000\nNoNewPrivs:\t1\n"}),
			memlock: Fail, caps: Warn, rule: ruleNoIPCLock, via: "none", cmdUID: 1000, summaryIn: "uid 1000 has no CAP_IPC_LOCK"},
		{name: "status missing", tree: "ib-node", files: map[string]string{"proc/self/status": ""},
			memlock: OK, caps: Warn, rule: ruleUnlimited, via: "none", summaryIn: "unlimited"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := overlay(t, tc.tree, tc.files)
			env := tc.env
			if env == nil {
				env = []string{}
			}
			r := Run(context.Background(), Options{Root: root, Env: env, Plan: tc.plan})
			m, _ := r.Check(IDMemlock)
			c, _ := r.Check(IDCapabilities)
			assert.Equal(t, tc.memlock, m.Status, m.Summary)
			assert.Equal(t, tc.caps, c.Status, c.Summary)
			assert.Equal(t, tc.rule, m.Details["rule"])
			assert.Equal(t, tc.via, r.Command.Via)
			assert.Equal(t, tc.ambient, r.Command.Ambient)
			assert.Equal(t, tc.cmdUID, r.Command.UID)
			assert.Contains(t, m.Summary, tc.summaryIn)
		})
	}
}

// withRDMA adds one usable RDMA device (mlx5_0, port 1 ACTIVE, uverbs0) to
// an overlay, so memlock is judged.
func withRDMA(files map[string]string) map[string]string {
	out := map[string]string{
		"sys/class/infiniband/mlx5_0/ports/1/state":                         "4: ACTIVE\n",
		"sys/class/infiniband/mlx5_0/ports/1/phys_state":                    "5: LinkUp\n",
		"sys/class/infiniband/mlx5_0/ports/1/link_layer":                    "InfiniBand\n",
		"sys/class/infiniband/mlx5_0/ports/1/rate":                          "400 Gb/sec (4X NDR)\n",
		"sys/class/infiniband/mlx5_0/device/infiniband_verbs/uverbs0/ibdev": "mlx5_0\n",
		"dev/infiniband/uverbs0":                                            "",
	}
	for k, v := range files {
		out[k] = v
	}
	return out
}

// TestNoRDMANotJudged: without any RDMA device NCCL uses
// sockets and registers no memory, so memlock is not judged (skip, with
// the reason and what the rule would say with an HCA) and capabilities
// does not warn; the same tree with an HCA fails as before.
func TestNoRDMANotJudged(t *testing.T) {
	cases := []struct {
		tree, rule string
		files      map[string]string
	}{
		{tree: "docker-root", rule: ruleRootNoIPCLock},
		{tree: "userns", rule: ruleUserNS},
		{tree: "nnp", rule: ruleK8sTrap},
		{tree: "slurm", rule: ruleNoIPCLock, files: map[string]string{"proc/self/limits": "Max locked memory 65536 65536 bytes\n"}},
	}
	for _, tc := range cases {
		t.Run(tc.tree, func(t *testing.T) {
			r := Run(context.Background(), Options{Root: overlay(t, tc.tree, tc.files), Env: []string{}})
			m, _ := r.Check(IDMemlock)
			c, _ := r.Check(IDCapabilities)
			rd, _ := r.Check(IDRDMA)
			require.Equal(t, Skip, rd.Status)
			assert.Equal(t, Skip, m.Status, m.Summary)
			assert.Equal(t, OK, c.Status, c.Summary)
			assert.False(t, r.Failed(), "a node without RDMA fails nothing for memlock")
			assert.Equal(t, tc.rule, m.Details["rule"])
			assert.Equal(t, "no RDMA device", m.Details["not_judged"])
			assert.Contains(t, m.Summary, "no RDMA device, so NCCL uses sockets")
			assert.Contains(t, m.Summary, "with an HCA it would fail")
			assert.Empty(t, m.Fix)

			r = Run(context.Background(), Options{Root: overlay(t, tc.tree, withRDMA(tc.files)), Env: []string{}})
			m, _ = r.Check(IDMemlock)
			assert.Equal(t, Fail, m.Status, m.Summary)
			assert.Equal(t, tc.rule, m.Details["rule"])
			assert.NotContains(t, m.Details, "not_judged")
		})
	}
}

func TestProbeResults(t *testing.T) {
	probeErr := func(int64) error { return os.ErrPermission }
	t.Run("snapshot skips the probe", func(t *testing.T) {
		r := Run(context.Background(), Options{Root: "testdata/ib-node", Env: []string{}, Probe: 1 << 20, Prober: probeErr})
		m, _ := r.Check(IDMemlock)
		assert.Equal(t, OK, m.Status)
		assert.Contains(t, m.Details["probe"], "skipped")
		assert.NotContains(t, m.Details, "probe_ok")
		assert.Contains(t, m.Summary, "; the probe was skipped: --root reads a snapshot")
	})
	t.Run("live probe success says so", func(t *testing.T) {
		r := Run(context.Background(), Options{Env: []string{}, Probe: 1 << 20, Prober: func(int64) error { return nil }})
		m, _ := r.Check(IDMemlock)
		assert.Equal(t, true, m.Details["probe_ok"])
		assert.Contains(t, m.Summary, "; pinning 1 MiB with mlock(2) under CMD's credentials worked")
	})
	t.Run("live probe failure fails memlock", func(t *testing.T) {
		r := Run(context.Background(), Options{Env: []string{}, Probe: 1 << 20, Prober: probeErr})
		m, _ := r.Check(IDMemlock)
		assert.Equal(t, Fail, m.Status)
		assert.Equal(t, false, m.Details["probe_ok"])
		assert.Equal(t, int64(1<<20), m.Details["probe_bytes"])
		assert.Equal(t, os.ErrPermission.Error(), m.Details["probe_error"])
	})
	t.Run("live without prober", func(t *testing.T) {
		r := Run(context.Background(), Options{Env: []string{}, Probe: 1 << 20})
		m, _ := r.Check(IDMemlock)
		assert.Contains(t, m.Details["probe"], "skipped")
	})
	t.Run("cancelled context skips", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		r := Run(ctx, Options{Root: "testdata/ib-node", Env: []string{}})
		for _, c := range r.Checks[1:] {
			assert.Equal(t, Skip, c.Status, c.ID)
		}
	})
}

// Promise: limits that cannot be read are unknown, JSON
// null, in the memlock details and CMD's state, never soft/hard 0.
func TestUnreadableLimitsAreNull(t *testing.T) {
	rep := Run(context.Background(), Options{Root: t.TempDir()})
	b, err := json.Marshal(rep)
	require.NoError(t, err)
	var doc struct {
		Checks []struct {
			ID      string                     `json:"id"`
			Details map[string]json.RawMessage `json:"details"`
		} `json:"checks"`
	}
	require.NoError(t, json.Unmarshal(b, &doc))
	seen := 0
	for _, c := range doc.Checks {
		switch c.ID {
		case IDMemlock:
			for _, k := range []string{"soft", "hard", "soft_before", "hard_before"} {
				assert.Equal(t, "null", string(c.Details[k]), "memlock %s", k)
			}
			seen++
		case "capabilities":
			var cmd map[string]json.RawMessage
			require.NoError(t, json.Unmarshal(c.Details["command"], &cmd))
			assert.Equal(t, "null", string(cmd["memlock"]), "command.memlock")
			seen++
		}
	}
	assert.Equal(t, 2, seen)
}

// TestRaisePrediction covers what doctor --root predicts of the raise run
// makes (rlimit.Raised) on variants of the vm-root snapshot: the hard
// limit is lifted only where the tree shows CAP_SYS_RESOURCE effective in
// the initial user namespace.
func TestRaisePrediction(t *testing.T) {
	limits, err := os.ReadFile("testdata/vm-root/proc/self/limits")
	require.NoError(t, err)
	status, err := os.ReadFile("testdata/vm-root/proc/self/status")
	require.NoError(t, err)
	const mib8 = int64(8 << 20)
	withLimit := func(soft, hard string) string {
		return strings.Replace(string(limits), "Max locked memory         8388608 8388608", "Max locked memory         "+soft+" "+hard, 1)
	}
	noSysResource := strings.Replace(string(status), "CapEff:\t000001ffffffffff", "CapEff:\t000001fffeffffff", 1)
	const userns = "         0     100000      65536\n"
	cases := []struct {
		name   string
		files  map[string]string
		remove string
		before Rlimit
		after  Rlimit
		raise  string // the "raise" detail; "" absent
	}{
		{name: "as recorded", before: Rlimit{Soft: mib8, Hard: mib8}, after: Rlimit{Soft: Unlimited, Hard: Unlimited},
			raise: "simulated: ncclrun run raises the soft and the hard limit to unlimited (the snapshot holds CAP_SYS_RESOURCE in the initial user namespace)"},
		{name: "soft below hard", files: map[string]string{"proc/self/limits": withLimit("65536", "8388608")},
			before: Rlimit{Soft: 65536, Hard: mib8}, after: Rlimit{Soft: Unlimited, Hard: Unlimited},
			raise: "simulated: ncclrun run raises the soft and the hard limit to unlimited (the snapshot holds CAP_SYS_RESOURCE in the initial user namespace)"},
		{name: "no CAP_SYS_RESOURCE", files: map[string]string{"proc/self/status": noSysResource},
			before: Rlimit{Soft: mib8, Hard: mib8}, after: Rlimit{Soft: mib8, Hard: mib8}},
		{name: "no CAP_SYS_RESOURCE, soft below hard", files: map[string]string{"proc/self/status": noSysResource, "proc/self/limits": withLimit("65536", "8388608")},
			before: Rlimit{Soft: 65536, Hard: mib8}, after: Rlimit{Soft: mib8, Hard: mib8},
			raise: "simulated: ncclrun run raises the soft limit to the hard limit; the hard limit stays, as raising it needs CAP_SYS_RESOURCE"},
		{name: "user namespace", files: map[string]string{"proc/self/uid_map": userns, "proc/self/limits": withLimit("65536", "8388608")},
			before: Rlimit{Soft: 65536, Hard: mib8}, after: Rlimit{Soft: mib8, Hard: mib8},
			raise: "simulated: ncclrun run raises the soft limit to the hard limit; the hard limit stays, as CAP_SYS_RESOURCE in a user namespace does not raise it"},
		{name: "user namespace, soft=hard", files: map[string]string{"proc/self/uid_map": userns},
			before: Rlimit{Soft: mib8, Hard: mib8}, after: Rlimit{Soft: mib8, Hard: mib8}},
		{name: "uid_map not recorded", remove: "proc/self/uid_map", files: map[string]string{"proc/self/limits": withLimit("65536", "8388608")},
			before: Rlimit{Soft: 65536, Hard: mib8}, after: Rlimit{Soft: mib8, Hard: mib8},
			raise: "simulated: ncclrun run raises the soft limit to the hard limit; the hard limit stays, as the snapshot does not show whether CAP_SYS_RESOURCE is in the initial user namespace (no readable proc/self/uid_map)"},
		{name: "status not recorded", remove: "proc/self/status", files: map[string]string{"proc/self/limits": withLimit("65536", "8388608")},
			before: Rlimit{Soft: 65536, Hard: mib8}, after: Rlimit{Soft: mib8, Hard: mib8},
			raise: "simulated: ncclrun run raises the soft limit to the hard limit; the hard limit stays, as the snapshot's capabilities are unknown"},
		{name: "hard unlimited needs no capability", files: map[string]string{"proc/self/status": noSysResource, "proc/self/limits": withLimit("65536", "unlimited")},
			before: Rlimit{Soft: 65536, Hard: Unlimited}, after: Rlimit{Soft: Unlimited, Hard: Unlimited},
			raise: "simulated: ncclrun run raises the soft limit to the hard limit"},
		{name: "unlimited already", files: map[string]string{"proc/self/limits": withLimit("unlimited", "unlimited")},
			before: Rlimit{Soft: Unlimited, Hard: Unlimited}, after: Rlimit{Soft: Unlimited, Hard: Unlimited}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := overlay(t, "vm-root", tc.files)
			if tc.remove != "" {
				require.NoError(t, os.Remove(filepath.Join(root, tc.remove)))
			}
			r := Run(context.Background(), Options{Root: root, Env: []string{}})
			got, _ := r.Check(IDMemlock)
			assert.Equal(t, tc.before, Rlimit{Soft: got.Details["soft_before"].(int64), Hard: got.Details["hard_before"].(int64)}, "before")
			assert.Equal(t, tc.after, Rlimit{Soft: got.Details["soft"].(int64), Hard: got.Details["hard"].(int64)}, "after")
			assert.Equal(t, tc.after, r.Command.Memlock, "CMD's limit")
			raise, _ := got.Details["raise"].(string)
			assert.Equal(t, tc.raise, raise)
		})
	}
}
