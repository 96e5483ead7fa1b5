package diagnosis

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCauseFollowsErrno: one message format whose errno names different
// causes gets the title of the cause its errno names (a permission error
// on /dev/shm is no lack of space), and the DNS warnings of PyTorch's store
// client count only once the client gave up.
func TestCauseFollowsErrno(t *testing.T) {
	const (
		shmSize  = "Shared memory (/dev/shm) too small for NCCL"
		shmPerm  = "NCCL may not create its shared memory in /dev/shm (permission, not size)"
		shmSplit = "Ranks NCCL took for one host do not share /dev/shm"
		gaiTitle = "The store's address (MASTER_ADDR) does not resolve"
		gaiWarn  = "[W1203 09:12:01.118000000 socket.cpp:755] [c10d] The network addresses of (master-0.job, 29500) cannot be retrieved (gai error: -2 - Name or service not known).\n"
	)
	for _, tc := range []struct {
		name, log, id, title string
	}{
		{"create EACCES", "pod-0:301:301 [0] misc/shmutils.cc:73 NCCL WARN Error: failed to create shared memory file /dev/shm/nccl-XXXXXX, error Permission denied (13)\n" +
			"pod-0:301:301 [0] misc/shmutils.cc:128 NCCL WARN Error while creating shared memory segment /dev/shm/nccl-XXXXXX (size 9637888), error: Permission denied (13)", "shm", shmPerm},
		{"create EROFS", "pod-0:301:301 [0] os/linux.cc:780 NCCL WARN Error: failed to create shared memory file /dev/shm/nccl-XXXXXX, error Read-only file system (30)", "shm", shmPerm},
		{"2.22 pointer path", "pod-0:301:301 [0] misc/shmutils.cc:73 NCCL WARN Error: failed to create shared memory file 0x7ffd4c2a11e0, error Permission denied (13)", "shm", shmPerm},
		{"attach EACCES", "pod-0:302:302 [1] misc/shmutils.cc:128 NCCL WARN Error while attaching to shared memory segment /dev/shm/nccl-Qm3xP1 (size 9637888), error: Permission denied (13)", "shm", shmPerm},
		{"2.9 shm_open", "pod-0:302:302 [1] include/shm.h:27 NCCL WARN Call to shm_open failed : Permission denied", "shm", shmPerm},
		{"attach ENOENT", "pod-0:302:302 [1] misc/shmutils.cc:128 NCCL WARN Error while attaching to shared memory segment /dev/shm/nccl-Qm3xP1 (size 9637888), error: No such file or directory (2)", "shm", shmSplit},
		{"extend ENOSPC", "pod-0:301:301 [0] misc/shmutils.cc:87 NCCL WARN Error: failed to extend /dev/shm/nccl-XXXXXX to 9637892 bytes, error: No space left on device (28)\n" +
			"pod-0:301:301 [0] misc/shmutils.cc:128 NCCL WARN Error while creating shared memory segment /dev/shm/nccl-XXXXXX (size 9637888), error: No space left on device (28)", "shm", shmSize},
		{"2.12 open EACCES", "pod-0:301:301 [0] include/shm.h:30 NCCL WARN Call to open failed : Permission denied\n" +
			"pod-0:301:301 [0] misc/shmutils.cc:112 NCCL WARN Error while creating shared memory segment /dev/shm/nccl-abc (size 9637888)", "shm", shmPerm},
		{"segment without errno", "pod-0:301:301 [0] misc/shmutils.cc:112 NCCL WARN Error while creating shared memory segment /dev/shm/nccl-XXXXXX (size 9637888)", "shm", shmSize},
		{"unlink EPERM stays unlink", "pod-0:301:301 [0] misc/shmutils.cc:148 NCCL WARN unlink shared memory /dev/shm/nccl-abc failed, error: Operation not permitted (1)", "shm", shmSize},
		{"store gave up", gaiWarn + gaiWarn + "torch.distributed.DistNetworkError: The client socket has timed out after 900s while trying to connect to (master-0.job, 29500).", "socket-interface", gaiTitle},
		{"rendezvous gave up", gaiWarn + "torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to the C10d store has failed. See inner exception for details.", "socket-interface", gaiTitle},
		{"name resolved late", gaiWarn + gaiWarn + "node-1:77:77 [0] NCCL INFO Init COMPLETE", "", ""},
		{"address family only", "[W1203 09:12:01.118000000 socket.cpp:755] [c10d] The IPv6 network addresses of (master-0.job, 29500) cannot be retrieved (gai error: -9 - Address family for hostname not supported).\n" +
			"torch.distributed.DistNetworkError: The client socket has timed out after 900s while trying to connect to (master-0.job, 29500).", "collective-timeout", "Ranks timed out reaching PyTorch's key-value store or rendezvous"},
		{"store port taken", "[W604 16:02:11.512004613 socket.cpp:752] [c10d] The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use).\n" +
			"torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use). The server socket has failed to bind to 0.0.0.0:29500 (errno: 98 - Address already in use).", "port-in-use", "The rendezvous port is already in use (MASTER_PORT or NCCL_COMM_ID)"},
		{"one family's bind warning", "[W604 16:02:11.512004613 socket.cpp:752] [c10d] The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use).\n" +
			"node-1:77:77 [0] NCCL INFO Init COMPLETE", "", ""},
		{"socket transport size", "node-c:412:530 [2] transport/net_socket.cc:636 NCCL WARN NET/Socket : peer 10.0.0.4<51312> message truncated : receiving 262144 bytes instead of 131072.", "rank-mismatch", "Ranks issued different collectives (NCCL's network transport got a message of another size)"},
		{"versions explain the truncation", "node-b:77:77 [0] init.cc:775 NCCL WARN Mismatched NCCL version detected : rank 4 version 22304 rank 0 version 22602\n" +
			"node-b:77:77 [0] bootstrap.cc:77 NCCL WARN Message truncated : received 4096 bytes instead of 256", "version-mismatch", "NCCL versions differ between ranks or between libnccl and the program"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds, err := Explain(strings.NewReader(tc.log), Facts{})
			require.NoError(t, err)
			if tc.id == "" {
				assert.Empty(t, ids(ds))
				return
			}
			require.NotEmpty(t, ds)
			assert.Equal(t, tc.id, ds[0].ID)
			assert.Equal(t, tc.title, ds[0].Title)
		})
	}
}

// TestRequiresLeavesLine: a line whose pattern waits for a marker that is
// not on is left to the patterns after it as well, so a CUDA failure that
// no NVLS setup explains is still an NCCL error, and NVLS lines before it
// still make it nvls-fabric.
func TestRequiresLeavesLine(t *testing.T) {
	const warn = "h100-2:901:901 [0] init.cc:1507 NCCL WARN Cuda failure 'operation not permitted'\n"
	for _, tc := range []struct {
		name, log string
		ids       []string
	}{
		{"alone", warn, []string{"nccl-error"}},
		{"after NVLS setup", "h100-2:901:901 [0] NCCL INFO NVLS comm 0x5581c0a0 headRank 0 nHeads 8 buffSize 4194304\n" + warn, []string{"nvls-fabric"}},
		{"NVLS setup after it", warn + "h100-2:901:901 [0] NCCL INFO NVLS comm 0x5581c0a0 headRank 0 nHeads 8 buffSize 4194304", []string{"nvls-fabric"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds, err := Explain(strings.NewReader(tc.log), Facts{})
			require.NoError(t, err)
			assert.Equal(t, tc.ids, ids(ds))
		})
	}
}

// TestRequiresOwnEntryCountsOnce: a line that a pattern waiting for its
// marker and a pattern of the same entry both match counts once.
func TestRequiresOwnEntryCountsOnce(t *testing.T) {
	ds, err := Explain(strings.NewReader("pod-0:301:301 [0] misc/shmutils.cc:112 NCCL WARN Error while creating shared memory segment /dev/shm/nccl-abc (size 9637888)\n"), Facts{})
	require.NoError(t, err)
	require.Len(t, ds, 1)
	assert.Equal(t, "shm", ds[0].ID)
	assert.Equal(t, 1, ds[0].Lines)
	assert.Equal(t, 1, ds[0].Count)
}
