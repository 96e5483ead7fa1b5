package diagnosis

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func rankp(r int) *int { return &r }

// TestPeerLost: the survivors' lines of a peer that went away are
// peer-lost, naming the peer where the line shows it; NCCL's ambiguous
// remote error alone stays generic.
func TestPeerLost(t *testing.T) {
	tests := []struct {
		name  string
		log   []string
		id    string
		peers []string
	}{
		{"NCCL closed by remote peer", []string{
			"node-b:1:2 [0] misc/socket.cc:538 NCCL WARN socketProgress: Connection closed by remote peer node-a<45678>",
			"node-b:1:2 [0] NCCL INFO misc/socket.cc:752 -> 6",
		}, "peer-lost", []string{"node-a:45678"}},
		{"Gloo closed by peer under torchrun", []string{
			"[rank1]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer [10.0.0.1]:29500",
		}, "peer-lost", []string{"10.0.0.1"}},
		{"Gloo read error reset", []string{
			"RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Read error [10.0.0.1]:18822: Connection reset by peer",
		}, "peer-lost", []string{"10.0.0.1"}},
		{"store socket broken pipe", []string{
			"[W socket.cpp:601] sendBytes failed on SocketImpl(fd=5, addr=[node-b]:40012, remote=[node-a]:29400): Broken pipe",
		}, "peer-lost", nil},
		{"rendezvous closed", []string{
			"torch.distributed.elastic.rendezvous.api.RendezvousClosedError",
		}, "peer-lost", nil},
		{"remote error alone is generic", []string{
			"ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.",
		}, "nccl-error", nil},
		{"a user's broken pipe is nothing", []string{
			"BrokenPipeError: [Errno 32] Broken pipe",
		}, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds := explainString(t, strings.Join(tt.log, "\n")+"\n", Facts{})
			if tt.id == "" {
				assert.Empty(t, ds)
				return
			}
			require.NotEmpty(t, ds)
			assert.Equal(t, tt.id, ds[0].ID)
			assert.Equal(t, tt.peers, ds[0].Peers)
		})
	}
}

// TestKnockOnOf: a lost peer or a watchdog timeout after a specific
// failure on another host is marked as its consequence, and the first
// failure names its host, rank and time where the line shows them.
func TestKnockOnOf(t *testing.T) {
	log := strings.Join([]string{
		"n1:10:11 [0] misc/socket.cc:538 NCCL WARN socketProgress: Connection closed by remote peer n2<45678>",
		"[2025-06-01 10:00:03] n2:20:21 [0] misc/shmutils.cc:132 NCCL WARN Error while creating shared memory segment /dev/shm/nccl-x (size 9637888), error: No space left on device (28)",
		"[rank3]:[E ProcessGroupNCCL.cpp:1] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE) ran for 600000 milliseconds before timing out.",
	}, "\n") + "\n"
	m := NewMatcher(Facts{})
	require.NoError(t, FeedReader(m, strings.NewReader(log)))
	ds := m.Diagnoses()
	require.Equal(t, []string{"shm", "collective-timeout"}, ids(ds), "the lost peer is the shm failure's rank")
	assert.Empty(t, ds[0].KnockOnOf)
	assert.Equal(t, "shm", ds[1].KnockOnOf)
	assert.Equal(t, &Place{Host: "n2", Time: "2025-06-01 10:00:03"}, ds[0].FirstFailure)
	assert.Equal(t, &Place{Rank: rankp(3)}, ds[1].FirstFailure)
	f := m.FirstFailure()
	require.NotNil(t, f)
	assert.Equal(t, "shm", f.ID)
	assert.Equal(t, "n2", f.Host)
	assert.Contains(t, f.Line, "Error while creating shared memory segment")
}

// TestExceptionFirstFailure: under torchrun, rank 0 raises a program
// error and rank 1 then loses its peer: the exception is the first
// failure (in the order the lines came, whatever torch's timestamps say)
// and the lost peer its knock-on. An exception alone is no diagnosis;
// one after the lost peer is not the first failure.
func TestExceptionFirstFailure(t *testing.T) {
	raise := []string{
		"[rank0]: Traceback (most recent call last):",
		"[rank0]:   File \"/job/train.py\", line 9, in main",
		"[rank0]: KeyError: 'input_ids'",
	}
	lost := []string{
		"[rank1]: Traceback (most recent call last):",
		"[rank1]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer [127.0.0.1]:29500",
		"torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
	}
	run := func(lines ...[]string) (*Matcher, []Diagnosis) {
		var all []string
		for _, l := range lines {
			all = append(all, l...)
		}
		m := NewMatcher(Facts{})
		require.NoError(t, FeedReader(m, strings.NewReader(strings.Join(all, "\n")+"\n")))
		return m, m.Diagnoses()
	}

	m, ds := run(raise, lost)
	require.Equal(t, []string{"peer-lost"}, ids(ds))
	assert.Equal(t, KnockOnException, ds[0].KnockOnOf)
	f := m.FirstFailure()
	require.NotNil(t, f)
	assert.Equal(t, Failure{Place: Place{Rank: rankp(0)}, Line: "KeyError: 'input_ids'"}, *f)

	m, ds = run(raise)
	assert.Empty(t, ds)
	assert.Nil(t, m.FirstFailure())

	m, ds = run(lost, raise)
	require.Equal(t, []string{"peer-lost"}, ids(ds))
	assert.Empty(t, ds[0].KnockOnOf)
	assert.Equal(t, "peer-lost", m.FirstFailure().ID)
	assert.Equal(t, "127.0.0.1", m.FirstFailure().Host, "the peer that went away")
}

// TestRankTagCount: a generic NCCL error raised by both ranks of a
// 2-rank torchrun job, exception text only, "[rankN]:" prefixes, lines
// interleaved, is two processes.
func TestRankTagCount(t *testing.T) {
	const (
		rt  = "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1275, unhandled system error, NCCL version 2.14.3"
		sys = "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error."
	)
	tests := []struct {
		name string
		log  []string
	}{
		{"one after the other", []string{"[rank0]: " + rt, "[rank0]: " + sys, "[rank1]: " + rt, "[rank1]: " + sys}},
		{"interleaved", []string{"[rank0]: " + rt, "[rank1]: " + rt, "[rank0]: " + sys, "[rank1]: " + sys}},
		{"mpirun tags", []string{"[1,0]<stderr>:" + rt, "[1,1]<stderr>:" + rt, "[1,0]<stderr>:" + sys, "[1,1]<stderr>:" + sys}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds := explainString(t, strings.Join(tt.log, "\n")+"\n", Facts{})
			require.Equal(t, []string{"nccl-error"}, ids(ds))
			assert.Equal(t, 2, ds[0].Count)
			assert.Equal(t, 4, ds[0].Lines)
		})
	}
}

// TestRemoteHostFacts: run's facts are this host's. A registration
// ENOMEM printed by another host (its NCCL prefix) is judged as explain
// judges it, likely, with that host named, never as this host's adequate
// limit; the same line of this host follows the facts.
func TestRemoteHostFacts(t *testing.T) {
	const warn = ":1:2 [0] misc/ibvwrap.cc:190 NCCL WARN Call to ibv_reg_mr failed with error Cannot allocate memory\n"
	adequate := Facts{Known: true, MemlockAdequate: true, Seen: "RLIMIT_MEMLOCK unlimited, uid 0, CAP_IPC_LOCK effective", Host: "node-a.cluster.local"}

	ds := explainString(t, "node-b"+warn, adequate)
	require.Equal(t, []string{"memlock"}, ids(ds))
	assert.Equal(t, Likely, ds[0].Certainty)
	assert.Contains(t, ds[0].Cause, "Seen on node-b")
	assert.NotContains(t, ds[0].Cause, adequate.Seen)

	ds = explainString(t, "node-a"+warn, adequate)
	require.Equal(t, []string{"memory-registration"}, ids(ds))
	assert.Equal(t, Certain, ds[0].Certainty)

	low := Facts{Known: true, Seen: "RLIMIT_MEMLOCK 64 KiB (soft=hard), uid 1000", MemlockFix: "raise it here", Host: "node-a"}
	ds = explainString(t, "node-b"+warn, low)
	require.Equal(t, []string{"memlock"}, ids(ds))
	assert.Equal(t, Likely, ds[0].Certainty)
	assert.NotEqual(t, "raise it here", ds[0].Fix)

	// Without a host every line is this host's, as before.
	ds = explainString(t, "node-b"+warn, Facts{Known: true, MemlockAdequate: true})
	require.Equal(t, []string{"memory-registration"}, ids(ds))

	// A cause text saying "this host" names the other one.
	bootstrap := "node-b:7:8 [0] misc/socket.cc:1 NCCL WARN Bootstrap : no socket interface found\n"
	ds = explainString(t, bootstrap, Facts{Known: true, Host: "node-a"})
	require.Equal(t, []string{"socket-interface"}, ids(ds))
	for _, s := range []string{ds[0].Cause, ds[0].Fix, ds[0].How} {
		assert.NotContains(t, s, "this host")
	}
}

// TestGlooTitle: a Gloo failure is titled as Gloo's, not NCCL's.
func TestGlooTitle(t *testing.T) {
	for _, line := range []string{
		"RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/device.cc:84] ifa != nullptr. Unable to find address for: eth9",
		"RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:799] connect [127.0.1.1]:45678: Connection refused",
		"RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/device.cc:230] ss1.ss_family == ss2.ss_family. 2 vs 10",
	} {
		ds := explainString(t, line+"\n", Facts{})
		require.Equal(t, []string{"socket-interface"}, ids(ds), line)
		assert.True(t, strings.HasPrefix(ds[0].Title, "Gloo"), ds[0].Title)
	}
	ds := explainString(t, "h:1:2 [0] NCCL WARN Bootstrap : no socket interface found\n", Facts{})
	require.Equal(t, []string{"socket-interface"}, ids(ds))
	assert.True(t, strings.HasPrefix(ds[0].Title, "NCCL"), ds[0].Title)
}

// TestBenignFeed: a harmless line is not announced while the command
// runs (Feed), and gives way to the failure at exit.
func TestBenignFeed(t *testing.T) {
	m := NewMatcher(Facts{})
	assert.Nil(t, m.Feed([]byte("n1:10:11 [0] NCCL INFO Failed to open libibverbs.so[.1]")))
	d := m.Feed([]byte("n1:10:11 [0] enqueue.cc:1 NCCL WARN something nobody has seen before"))
	require.NotNil(t, d)
	assert.Equal(t, "nccl-error", d.ID)
	assert.Equal(t, []string{"nccl-error"}, ids(m.Diagnoses()))
	// Alone it is still the observation it is.
	assert.Equal(t, []string{"ibverbs-library"}, ids(explainString(t, "NCCL INFO Failed to open libibverbs.so[.1]\n", Facts{})))
	// With usable RDMA ports here, it is a failure of its own.
	m = NewMatcher(Facts{Known: true, RDMAPorts: []string{"mlx5_0:1"}})
	d = m.Feed([]byte("n1:10:11 [0] NCCL INFO Failed to open libibverbs.so[.1]"))
	require.NotNil(t, d)
	assert.Equal(t, "ibverbs-library", d.ID)
}

// TestFoldedPeerLost: a lost peer after a cause of its own is that
// cause's consequence and not listed; the first failure of a vanished
// node is the peer, as the survivor's line names it.
func TestFoldedPeerLost(t *testing.T) {
	ds := explainString(t, strings.Join([]string{
		"[2025-06-01 10:00:03] n2:20:21 [0] misc/shmutils.cc:132 NCCL WARN Error while creating shared memory segment /dev/shm/nccl-x (size 9637888), error: No space left on device (28)",
		"n1:10:11 [0] misc/socket.cc:538 NCCL WARN socketProgress: Connection closed by remote peer n2<45678>",
	}, "\n")+"\n", Facts{})
	assert.Equal(t, []string{"shm"}, ids(ds))

	m := NewMatcher(Facts{})
	require.NoError(t, FeedReader(m, strings.NewReader("4: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer [10.0.0.9]:29500\n")))
	f := m.FirstFailure()
	require.NotNil(t, f)
	assert.Equal(t, Failure{ID: "peer-lost", Place: Place{Host: "10.0.0.9"}, Line: f.Line}, *f)
	ds = m.Diagnoses()
	require.Len(t, ds, 1)
	assert.Equal(t, 1, ds[0].Count)

	// A peer named by its fully qualified name is the host of its own
	// NCCL lines, which carry the short name.
	m = NewMatcher(Facts{})
	require.NoError(t, FeedReader(m, strings.NewReader("RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer [worker-2.job.default.svc.cluster.local]:29500\n")))
	f = m.FirstFailure()
	require.NotNil(t, f)
	assert.Equal(t, "worker-2", f.Host)
}

// TestGenericAfterException: a user kernel's CUDA fault that the
// watchdog then re-reports as an NCCL error is the program's: nothing.
func TestGenericAfterException(t *testing.T) {
	ds := explainString(t, strings.Join([]string{
		"[rank1]:RuntimeError: CUDA error: an illegal memory access was encountered",
		"[rank1]:terminate called after throwing an instance of 'c10::DistBackendError'",
		"[rank1]:  what():  [PG 0 Rank 1] Process group watchdog thread terminated with exception: NCCL error: unhandled cuda error",
	}, "\n")+"\n", Facts{})
	assert.Empty(t, ds)
	// The same generic error without the exception before it stays. It
	// is the what() line that says so: the abort banner before it only
	// restates the exception's type and is no sighting of its own.
	ds = explainString(t, strings.Join([]string{
		"[rank1]:terminate called after throwing an instance of 'c10::DistBackendError'",
		"[rank1]:  what():  [PG 0 Rank 1] Process group watchdog thread terminated with exception: NCCL error: unhandled cuda error",
	}, "\n")+"\n", Facts{})
	assert.Equal(t, []string{"nccl-error"}, ids(ds))
	assert.Empty(t, explainString(t, "[rank1]:terminate called after throwing an instance of 'c10::DistBackendError'\n", Facts{}))
}

// TestRemoteCheckAllocationFree: telling this host's raw NCCL lines from
// another host's costs no allocation.
func TestRemoteCheckAllocationFree(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not exact under the race detector")
	}
	m := NewMatcher(Facts{Known: true, Host: "node-a.cluster.local"})
	local := []byte("node-a:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA")
	remote := []byte("node-b:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA")
	lv, rv := viewOf(local), viewOf(remote)
	assert.True(t, m.isLocal(&lv))
	assert.False(t, m.isLocal(&rv))
	assert.Zero(t, testing.AllocsPerRun(100, func() { lv, rv := viewOf(local), viewOf(remote); m.isLocal(&lv); m.isLocal(&rv) }))
}

// TestOneHostManyRanks: several ranks on one host and none elsewhere is
// a single-node job, whose socket fallback and libibverbs driver warnings
// are harmless; a second host makes it multi-node again.
func TestOneHostManyRanks(t *testing.T) {
	noDev := func(host string, pid int) string {
		return host + ":" + itoa(pid) + ":" + itoa(pid) + " [0] NCCL INFO NET/IB : No device found."
	}
	const warn = "libibverbs: Warning: couldn't load driver 'libqedr-rdmav34.so': libqedr-rdmav34.so: cannot open shared object file: No such file or directory"
	tests := []struct {
		name string
		log  []string
		want []string
	}{
		{"one process", []string{warn, noDev("ws", 10)}, []string{"ibverbs-library", "rdma-device"}},
		{"two ranks on one host", []string{warn, noDev("ws", 10), warn, noDev("ws", 11)}, nil},
		{"a second host", []string{noDev("ws", 10), noDev("ws", 11), noDev("ws2", 12)}, []string{"rdma-device"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ids(explainString(t, strings.Join(tt.log, "\n")+"\n", Facts{}))
			if tt.want == nil {
				assert.Empty(t, got)
			} else {
				assert.Equal(t, tt.want, got)
			}
		})
	}
}

// TestFoldedPeerLostNotAnnounced: while the command runs, a lost peer
// after a failure of its own is not announced as a cause of its own.
func TestFoldedPeerLostNotAnnounced(t *testing.T) {
	m := NewMatcher(Facts{})
	d := m.Feed([]byte("n2:20:21 [0] misc/shmutils.cc:132 NCCL WARN Error while creating shared memory segment /dev/shm/nccl-x (size 9637888), error: No space left on device (28)"))
	require.NotNil(t, d)
	assert.Equal(t, "shm", d.ID)
	assert.Nil(t, m.Feed([]byte("n1:10:11 [0] misc/socket.cc:538 NCCL WARN socketProgress: Connection closed by remote peer n2<45678>")))
	// Alone, it is.
	m = NewMatcher(Facts{})
	d = m.Feed([]byte("n1:10:11 [0] misc/socket.cc:538 NCCL WARN socketProgress: Connection closed by remote peer n2<45678>"))
	require.NotNil(t, d)
	assert.Equal(t, "peer-lost", d.ID)
}

// TestTimeoutNamesRankWaitedFor: a store or barrier timeout that names
// the rank it waited for has that rank as its first failure, not the
// rank that printed it.
func TestTimeoutNamesRankWaitedFor(t *testing.T) {
	tests := []struct {
		line string
		rank int
		says string
	}{
		{"[rank0]:RuntimeError: [Rank 0]: Rank 6 failed to pass monitoredBarrier in 600000 ms", 6, "rank 6."},
		{"[rank0]:RuntimeError: [Rank 0]: Ranks 6, 7 failed to pass monitoredBarrier in 600000 ms", 6, "ranks 6, 7."},
		{"[rank3]:[E1205 10:00:00.000000 ProcessGroupNCCL.cpp:1] [PG 0 Rank 3] retrieving ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: wait timeout after 1800000ms, keys: /default_pg/0//cuda//0", 0, "rank 0."},
	}
	for _, tt := range tests {
		m := NewMatcher(Facts{})
		require.NoError(t, FeedReader(m, strings.NewReader(tt.line+"\n")))
		f := m.FirstFailure()
		require.NotNil(t, f, tt.line)
		assert.Equal(t, "collective-timeout", f.ID)
		require.NotNil(t, f.Rank, tt.line)
		assert.Equal(t, tt.rank, *f.Rank, tt.line)
		assert.Empty(t, f.Host)
		ds := m.Diagnoses()
		require.Len(t, ds, 1)
		assert.True(t, strings.HasSuffix(ds[0].Cause, "waited for "+tt.says), ds[0].Cause)
	}
	// A timeout that names no rank keeps the place of its line.
	m := NewMatcher(Facts{})
	require.NoError(t, FeedReader(m, strings.NewReader("[rank2]:torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 3/4 clients joined.\n")))
	f := m.FirstFailure()
	require.NotNil(t, f)
	require.NotNil(t, f.Rank)
	assert.Equal(t, 2, *f.Rank)
}
