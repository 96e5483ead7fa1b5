//go:build integration

package integration

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRuntimeFacts shows, without ncclrun, what Docker gives the first
// process of a container in each scenario: the memlock limit, CAP_IPC_LOCK in
// each set, no_new_privs, and whether mlock of 16 MiB works. ncclrun's
// decisions rest on these facts; if the runtime changes, this test says so
// before the ncclrun tests fail for a less obvious reason.
func TestRuntimeFacts(t *testing.T) {
	img := scenarioImage(t)
	dSoft, dHard, dOK := daemonMemlock()
	if dOK {
		t.Logf("containerd's RLIMIT_MEMLOCK on this host: soft %s hard %s", fmtLimit(dSoft), fmtLimit(dHard))
	}
	for _, s := range scenarios {
		t.Run(s.Name, func(t *testing.T) {
			eopts, cmd := s.entry("/capprobe", "--mlock", strconv.Itoa(pinBytes))
			r := runContainer(t, append(append([]string{}, s.Opts...), eopts...), img, cmd...)
			if s.RawLimit == unlimited && !engineCanRaiseLimits() {
				// runc sets process.rlimits with prlimit from outside the
				// container: above the daemon's hard limit that needs
				// CAP_SYS_RESOURCE in the engine (rootless Docker, or a VM
				// like this one whose bounding set lacks it).
				assert.Equal(t, 125, r.Code, "docker run exit status")
				assert.Contains(t, r.Stderr, "error setting rlimit type 8: operation not permitted")
				recordNoStart(s.Name, "docker run: exit 125, runc: error setting rlimit type 8: operation not permitted")
				return
			}
			require.Zerof(t, r.Code, "capprobe failed: %s %s", r.Stdout, r.Stderr)
			p := parseProbe(t, r.Stdout)
			recordRaw(s.Name, p)

			wantSoft, wantHard := s.RawLimit, s.RawLimit
			if s.RawLimit == 0 {
				if !dOK {
					t.Logf("cannot read containerd's limits here; not comparing the inherited limit")
					wantSoft, wantHard = p.MemlockSoft, p.MemlockHard
				} else {
					wantSoft, wantHard = dSoft, dHard
				}
			}
			assert.Equal(t, wantSoft, p.MemlockSoft, "memlock soft")
			assert.Equal(t, wantHard, p.MemlockHard, "memlock hard")
			assert.Equal(t, s.RawUID, p.UID, "uid")
			assert.Equal(t, s.RawIPC, ipc{Eff: p.IPCLock["CapEff"], Prm: p.IPCLock["CapPrm"], Bnd: p.IPCLock["CapBnd"], Amb: p.IPCLock["CapAmb"]},
				"CAP_IPC_LOCK in eff/prm/bnd/amb (caps %v)", p.Caps)
			wantNNP := 0
			for _, o := range s.Opts {
				if o == "no-new-privileges" {
					wantNNP = 1
				}
			}
			assert.Equal(t, wantNNP, p.NoNewPrivs, "NoNewPrivs")
			// RawMlock is written for a daemon limit under 16 MiB (8 MiB
			// here); a host whose daemon has more lets everyone pin.
			wantMlock := s.RawMlock || wantSoft == unlimited || wantSoft >= pinBytes
			assert.Equal(t, wantMlock, p.MlockOK, "mlock of 16 MiB under %s: %s", fmtLimit(wantSoft), p.MlockErr)
		})
	}
	// TestNcclrunScenarios ran before (file order): the rows are complete.
	if !t.Failed() {
		checkDocDockerRows(t)
	}
}
