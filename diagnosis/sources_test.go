package diagnosis

import (
	"bufio"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sourceMessages holds, per row of docs/diagnosis.md's "Where the formats
// come from", one message as the program of that row prints it at the
// versions the row names (lines joined by "\n"; where a cause needs the
// lines around it, they are there).
var sourceMessages = map[string]string{
	"nccl-cudacheck": "dgx1:4242:4242 [3] enqueue.cc:215 NCCL WARN Cuda failure 'invalid device function'\n" +
		"dgx1:4242:4242 [3] NCCL INFO enqueue.cc:1042 -> 1",
	"nccl-cucheck":         "[2025-03-02 08:11:09] b200-7:811:811 [0] init.cc:1507 NCCL WARN Cuda failure 209 'no kernel image is available for execution on the device'",
	"nccl-tests":           "node03: Test CUDA failure common.cu:892 'CUDA driver version is insufficient for CUDA runtime version'",
	"torch-cuda-error":     "[rank1]: RuntimeError: CUDA error: no kernel image is available for execution on the device",
	"torch-driver-too-old": "RuntimeError: The NVIDIA driver on your system is too old (found version 11040). Please update your GPU driver by downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx",
	"torch-device-count":   "RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling NumCudaDevices() that might have already set an error? Error 803: system has unsupported display driver / cuda driver combination",
	"torch-capability": "/usr/local/lib/python3.10/dist-packages/torch/cuda/__init__.py:215: UserWarning: \n" +
		"NVIDIA H100 80GB HBM3 with CUDA capability sm_90 is not compatible with the current PyTorch installation.",
	"cuda-error-names": "cudaGetDeviceCount returned 35",
	"nvls-cucheck-old": "h100-2:901:901 [0] NCCL INFO NVLS comm 0x5581c0a0 headRank 0 nHeads 8 buffSize 4194304 memSize 2097152 nvlsPerRankSize 201326592 nvlsTotalSize 1610612736\n" +
		"h100-2:901:901 [0] transport/nvls.cc:154 NCCL WARN Cuda failure 'invalid argument'",
	"nvls-cucheck": "h100-2:901:901 [0] transport/nvls.cc:154 NCCL WARN Cuda failure 1 'invalid argument'\n" +
		"h100-2:901:901 [0] NCCL INFO transport/nvls.cc:402 -> 1",
	"nvls-bind": "[2025-09-14 03:12:44] h200-b:3301:3301 [5] transport/nvls.cc:284 NCCL WARN Failed to bind NVLink SHARP (NVLS) Multicast memory of size 1207959552 : CUDA error 1 'invalid argument'.\n" +
		"This is usually caused by a system or configuration error in the Fabric Manager or NVSwitches.",
	"mnnvl-unsupported": "gb200-n1:72:72 [0] mnnvl.cc:69 NCCL WARN MNNVL (cliqueSize 8) is available but not supported on this system. Check the IMEX configuration.",
	"mnnvl-imex":        "[2025-10-01 12:00:01] gb200-n1:72:72 [0] mnnvl.cc:74 NCCL WARN MNNVL (cliqueSize 72) is available but not working on this system. Check the IMEX channel configuration (/dev/nvidia-caps-imex-channels). Set NCCL_MNNVL_ENABLE=0 to ignore this issue.",
	"cuda-802":          "torch.AcceleratorError: CUDA error: system not yet initialized",
	"nvls-file":         "[rank2]: gpu-h100-07:412:500 [2] transport/nvls.cc:60 NCCL WARN Cuda failure 801 'operation not supported'",
	"nvls-any-code":     "[2025-03-02 08:11:41] h100-a:3312:3390 [5] transport/nvls.cc:161 NCCL WARN Cuda failure 401 'the operation cannot be performed in the present state'",
	"socket-virtual-if": "worker-b:2307485:2308122 [0] NCCL INFO NET/Socket : Using [0]enp6s0:192.168.20.32<0> [1]br-0e9f55a3c1d7:172.17.0.1<0> [2]veth91c03ab:fe80::b8d5:61ff:fe0a:4e1b%veth91c03ab<0>\n" +
		"worker-b:2307485:2308122 [0] NCCL INFO comm 0x5581 rank 2 nRanks 4 nNodes 2 localRanks 2 localRank 0 MNNVL 0",
	"shm-nameless":       "c4-gpu-019:5100:5188 [2] misc/shmutils.cc:128 NCCL WARN Error while attaching to shared memory segment /dev/shm/nccl- (size 0), error: No such file or directory (2)",
	"ib-forced-missing":  "[rank3]: gpu-7:812:812 [3] net.cc:579 NCCL WARN Error: network IB not found.",
	"cqe-error":          "gpu-3:4410:4502 [2] transport/net_ib/p2p_resiliency.cc:47 NCCL WARN NET/IB: Fatal error. Detected 2 failed devices out of 4 devices on the send communicator (comm=0x7f3a2c0d1e00). No support for more than a single failed device.",
	"host-alloc":         "node-4:310:310 [1] include/alloc.h:159 NCCL WARN Failed to CUDA host alloc 1048576 bytes",
	"init-version":       "node-b:77:77 [0] init.cc:775 NCCL WARN Mismatched NCCL version detected : rank 4 version 22304 rank 0 version 22602",
	"ras-version-code":   "node-c:91:120 [0] ras/ras.cc:391 NCCL WARN NCCL version mismatch with remote peer 10.1.0.3<37815> (local: 22602, remote 22403)",
	"ras-version-string": "[2026-01-05 09:00:00] node-c:91:120 [0] ras/ras.cc:415 NCCL WARN NCCL version mismatch with remote peer 10.1.0.3<37815> (local: 2.30.7, remote 2.30.3)",
	"dev-api-version":    "node-a:5:5 [0] dev_runtime.cc:1428 NCCL WARN NCCL library is too old. This application was compiled with NCCL version 2.30.7, but is running with NCCL library version 2.30.3.",
	"loader-symbol":      "ImportError: /opt/venv/lib/python3.11/site-packages/torch/lib/libtorch_cuda.so: undefined symbol: ncclCommInitRankScalable",
	"store-get-socket":   "[rank3]: torch.distributed.DistBackendError: [3] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: Socket Timeout",
	"store-get-wait":     "[rank3]: torch.distributed.DistBackendError: [3] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: wait timeout after 600000ms, keys: /default_pg//cuda//0",
	"store-barrier":      "RuntimeError: Timed out initializing process group in store based barrier on rank: 5, for key: store_based_barrier_key:1 (world_size=16, worker_count=15, timeout=0:30:00)",
	"monitored-barrier":  "RuntimeError: Rank 6 failed to pass monitoredBarrier in 600000 ms",
	"store-clients":      "torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 3/4 clients joined.",
	"store-wait-1x":      "RuntimeError: Wait timeout",
	"store-connect":      "torch.distributed.DistNetworkError: The client socket has timed out after 900s while trying to connect to (trainer-0, 29500).",
	"rendezvous-timeout": "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError",
	"gloo-connect-old":   "RuntimeError: [/opt/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:799] connect [127.0.1.1]:58211: Connection refused",
	"gloo-connect-new":   "[E1002 10:00:00.000000000 debug_logger.cc:12] failed to connect, willRetry=0, retry=3, retryLimit=3, rank=2, size=4, local=[10.0.0.12]:40022, remote=[127.0.1.1]:58211, error=SO_ERROR: Connection refused, remote=[127.0.1.1]:58211",
	"gloo-no-address":    "RuntimeError: [../third_party/gloo/gloo/transport/tcp/device.cc:84] ifa != nullptr. Unable to find address for: ib0",
	"gloo-family":        "RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/device.cc:285] ss1.ss_family == ss2.ss_family. 2 vs 10",
	"gloo-op-timeout":    "RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:133] Timed out waiting 1800000ms for send operation to complete",
	"store-key-1x":       "RuntimeError: Timeout waiting for key: default_pg/0//cuda//0 after 1800000 ms",
	"pingpong-mr": "  local address:  LID 0x0000, QPN 0x000011, PSN 0x5a2b01, GID fe80::5054:ff:fe12:3456\n" +
		"Couldn't register MR",
	"pingpong-qp":       "Failed to modify QP to RTR\nCouldn't connect to remote QP",
	"perftest-mr-old":   "Couldn't allocate MR\n Failed to create MR\n Couldn't create IB resources",
	"perftest-mr-errno": "Couldn't allocate MR with error=12\nFailed to create MR\n Couldn't create IB resources",
	"libibverbs-rlimit": "libibverbs: Warning: RLIMIT_MEMLOCK is 32768 bytes.\n    This will severely limit memory registrations.",
	"ucx-reg-mr":        "[1733130000.443322] [hpc-b08:4410:0]          ib_md.c:309  UCX  ERROR ibv_reg_mr(address=0x7f1c2a000000, length=2097152, access=0xf) failed: Cannot allocate memory : Please set max locked memory (ulimit -l) to 'unlimited' (current: 8192 kbytes)",
	"nccl-p2p-cudacheck": "node1:5120:5188 [1] transport/p2p.cc:299 NCCL WARN Cuda failure 'peer access is not supported between these two devices'\n" +
		"node1:5120:5188 [1] NCCL INFO transport/p2p.cc:420 -> 1",
	"nccl-p2p-peer": "ws-4090:2210:2210 [0] transport/p2p.cc:333 NCCL WARN failed to peer with device 1(=41000): 217 peer access is not supported between these two devices",
	"nccl-comm-id-gai": "trainer-1:88:88 [0] misc/socket.cc:267 NCCL WARN Net : error encountered when getting address info : Name or service not known\n" +
		"trainer-1:88:88 [0] bootstrap.cc:210 NCCL WARN Invalid NCCL_COMM_ID, please use format: <ipv4>:<port> or [<ipv6>]:<port> or <hostname>:<port>",
	"c10d-gai": "[W1203 09:12:01.118000000 socket.cpp:755] [c10d] The network addresses of (job-master-0.job, 29500) cannot be retrieved (gai error: -3 - Temporary failure in name resolution).\n" +
		"torch.distributed.DistNetworkError: The client socket has timed out after 900s while trying to connect to (job-master-0.job, 29500).",
	"ibv-poll-cq":          "gpu-12:4410:4502 [3] include/ibvwrap.h:62 NCCL WARN Call to ibv_poll_cq() returned -1",
	"bootstrap-truncated":  "node-b:77:77 [0] bootstrap.cc:77 NCCL WARN Message truncated : received 4096 bytes instead of 256",
	"bootstrap-root":       "node-a:61:95 [0] bootstrap.cc:335 NCCL WARN Bootstrap Root : mismatch in info from procs, nranks 16 vs 8, nroots 1 vs 1, iroot 0 vs 0, offset 0 vs 0",
	"socket-truncated":     "node-c:412:530 [2] transport/net_socket.cc:636 NCCL WARN NET/Socket : peer 10.0.0.4<51312> message truncated : receiving 262144 bytes instead of 131072. If you believe your socket network is in healthy state, there may be a mismatch in collective sizes or environment settings (e.g. NCCL_PROTO, NCCL_ALGO) between ranks",
	"shm-errno":            "[2025-05-04 11:02:13] pod-0:301:301 [0] misc/shmutils.cc:73 NCCL WARN Error: failed to create shared memory file /dev/shm/nccl-XXXXXX, error Permission denied (13)",
	"ib-size-mismatch":     "node3:5501:5590 [0] transport/net_ib.cc:1088 NCCL WARN NET/IB : req 1/1 tag 7 peer 10.0.0.1<44211> collective mismatch error, local size 1048576 remote size 524288",
	"c10d-unreachable":     "[rank5]: torch.distributed.DistNetworkError: The client socket has failed to connect to any network address of (10.0.0.1, 29500). The client socket has failed to connect to [10.0.0.1]:29500 (errno: 113 - No route to host).",
	"nccl-bind-not-local":  "node-a:71:71 [0] misc/socket.cc:380 NCCL WARN Call to bind failed : Cannot assign requested address",
	"c10d-port-in-use":     "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use). The server socket has failed to bind to 0.0.0.0:29500 (errno: 98 - Address already in use).",
	"store-port-in-use-1x": "RuntimeError: Address already in use",
	"nccl-bind-in-use":     "node-a:71:71 [0] misc/socket.cc:137 NCCL WARN Call to bind failed: Address already in use",
	"store-get-lost":       "[rank1]: torch.distributed.DistBackendError: [1] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: Connection reset by peer",
	"nvlink-p2p-disabled":  "dgx-04:7711:7711 [0] graph/paths.cc:330 NCCL WARN P2P is disabled between NVLINK connected GPUs 1 and 0. This should not be the case given their connectivity, and is probably due to a hardware issue. If you still want to proceed, you can set NCCL_IGNORE_DISABLED_P2P=1.",
	"nvml-mismatch":        "dgx-04:7711:7711 [0] misc/nvmlwrap.cc:182 NCCL WARN nvmlInit_v2() failed: Driver/library version mismatch",
	"ofi-cq-read":          "ip-10-0-1-2:1234:1300 [0] nccl_net_ofi_rdma.cpp:1234 NCCL WARN NET/OFI Unable to retrieve completion queue entries. RC: -5, ERROR: Input/output error",
	"ib-link-layer-mix":    "gpu-21:3120:3310 [4] transport/net_ib.cc:1262 NCCL WARN NET/IB : Attempted to connect incompatible devices: [0]mlx5_0:1/IB and [0]mlx5_4:1/RoCE. Try selecting NICs of only one link type using NCCL_IB_HCA",
	"oob-ifname":           "gpu-21:3120:3120 [0] bootstrap.cc:516 NCCL WARN no device found matching mlx5_9, verify NCCL_OOB_NET_IFNAME",
	"ompi-btl-connect": "WARNING: Open MPI failed to TCP connect to a peer MPI process.  This\n" +
		"should not happen.\n\nYour Open MPI job may now hang or fail.\n\n" +
		"  Local host: node-b\n  PID:        4121\n  Message:    connect() to 172.17.0.1:1024 failed\n  Error:      Connection refused (111)",
	"ompi-oob-connect":       "A process or daemon was unable to complete a TCP connection\nto another process:\n  Local host:    node1\n  Remote host:   node2\nThis is usually caused by a firewall on the remote host.",
	"nccl-connect-exhausted": "node-b:4410:4490 [0] misc/socket.cc:476 NCCL WARN socketStartConnect: exceeded retries (20000)",
}

// sourceRow is a row of the provenance table.
type sourceRow struct{ name, id, versions string }

// sourceRows reads the provenance table of docs/diagnosis.md.
func sourceRows(t *testing.T) []sourceRow {
	t.Helper()
	f, err := os.Open("../docs/diagnosis.md")
	require.NoError(t, err)
	defer f.Close()
	row := regexp.MustCompile("^\\| `([a-z0-9-]+)` \\| `([a-z0-9-]+)` \\|.*\\| ([^|]+) \\|$")
	var rows []sourceRow
	in := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			in = line == "## Where the formats come from"
			continue
		}
		if m := row.FindStringSubmatch(line); in && m != nil {
			rows = append(rows, sourceRow{name: m[1], id: m[2], versions: strings.TrimSpace(m[3])})
		}
	}
	require.NoError(t, sc.Err())
	return rows
}

// TestSourceFamilies checks one message of every row of the provenance
// table (a format as one program prints it over one range of versions)
// against the shipped catalog: the row's id comes first. A row without a
// message, or a message without a row, fails.
func TestSourceFamilies(t *testing.T) {
	rows := sourceRows(t)
	require.NotEmpty(t, rows, "no provenance rows parsed from docs/diagnosis.md")
	seen := map[string]bool{}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			assert.False(t, seen[r.name], "row %q twice", r.name)
			seen[r.name] = true
			msg, ok := sourceMessages[r.name]
			require.True(t, ok, "row %q (%s, %s) has no message in sourceMessages", r.name, r.id, r.versions)
			_, ok = DefaultCatalog().Entry(r.id)
			require.True(t, ok, "row %q: %q is not a catalog id", r.name, r.id)
			ds, err := Explain(strings.NewReader(msg), Facts{})
			require.NoError(t, err)
			require.NotEmpty(t, ds, "%s (%s): no diagnosis for %q", r.name, r.versions, msg)
			assert.Equal(t, r.id, ds[0].ID, "%s (%s): %q", r.name, r.versions, msg)
		})
	}
	for name := range sourceMessages {
		assert.True(t, seen[name], "message %q has no row in docs/diagnosis.md", name)
	}
}

// TestSourceFamiliesFacts: the verbs tools' registration failures follow
// run's facts like NCCL's: certain memlock under a low limit, and
// memory-registration when the allowance was adequate.
func TestSourceFamiliesFacts(t *testing.T) {
	for _, name := range []string{"pingpong-mr", "perftest-mr-old", "perftest-mr-errno", "ucx-reg-mr"} {
		t.Run(name, func(t *testing.T) {
			for _, tc := range []struct {
				facts     Facts
				id, certy string
			}{
				{Facts{}, "memlock", Likely},
				{Facts{Known: true, Seen: "RLIMIT_MEMLOCK 64 KiB, no CAP_IPC_LOCK"}, "memlock", Certain},
				{Facts{Known: true, MemlockAdequate: true, Seen: "RLIMIT_MEMLOCK unlimited"}, "memory-registration", Certain},
			} {
				ds, err := Explain(strings.NewReader(sourceMessages[name]), tc.facts)
				require.NoError(t, err)
				require.NotEmpty(t, ds)
				assert.Equal(t, tc.id, ds[0].ID, "%+v", tc.facts)
				assert.Equal(t, tc.certy, ds[0].Certainty, "%+v", tc.facts)
			}
		})
	}
}
