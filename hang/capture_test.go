package hang

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ncclrun/ncclrun/hang/hangtest"
)

func TestDescendants(t *testing.T) {
	root := t.TempDir()
	for pid, stat := range map[int]string{
		1:  "1 (init) S 0 1 1",
		10: "10 (torchrun) S 1 10 10",
		11: "11 (pt_main_thread) S 10 10 10",
		12: "12 (a ) b (c) S 10 10 10", // a name with ") " in it
		13: "13 (python3) S 11 10 10",
		20: "20 (other) S 1 20 20",
	} {
		dir := filepath.Join(root, strconv.Itoa(pid))
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "stat"), []byte(stat+" 0 0 0\n"), 0o644))
	}
	require.NoError(t, os.MkdirAll(filepath.Join(root, "self"), 0o755))
	assert.Equal(t, []int{11, 12, 13}, Descendants(root, 10))
	assert.Empty(t, Descendants(root, 13))
}

// fakePySpy is a py-spy that prints a stack for pid 1000 and fails as
// py-spy does for any other process.
func fakePySpy(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "py-spy")
	require.NoError(t, os.WriteFile(p, []byte(`#!/bin/sh
[ "$1 $2 $3" = "dump --nonblocking --pid" ] || { echo "bad args: $*" >&2; exit 2; }
if [ "$4" = 1000 ]; then
	printf 'Process 1000: python3 train.py\nThread 1000 (idle): "MainThread"\n    all_reduce (torch/distributed/distributed_c10d.py:2050)\n'
	exit 0
fi
echo "Error: Failed to find python version from target process" >&2
exit 1
`), 0o755))
	return p
}

func TestCapture(t *testing.T) {
	f := &hangtest.RAS{JSON: rasJSONReport}
	addr := f.Serve(t)
	dir := t.TempDir()
	ev := Capture(context.Background(), Options{Dir: dir, RASAddr: addr, PySpy: fakePySpy(t), PIDs: []int{1000, 1001}})
	require.NotNil(t, ev.RAS)
	assert.Empty(t, ev.RAS.Error)
	assert.Equal(t, filepath.Join(dir, "ras-status.json"), ev.RASFile)
	b, err := os.ReadFile(ev.RASFile)
	require.NoError(t, err)
	assert.Equal(t, rasJSONReport, string(b))
	require.Len(t, ev.Stacks, 2)
	assert.Equal(t, filepath.Join(dir, "stacks-1000.txt"), ev.Stacks[0].File)
	assert.Contains(t, ev.Stacks[1].Error, "Failed to find python version")
	b, err = os.ReadFile(ev.Stacks[0].File)
	require.NoError(t, err)
	assert.Contains(t, string(b), "all_reduce (torch/distributed/distributed_c10d.py:2050)")
	var onDisk Evidence
	b, err = os.ReadFile(filepath.Join(dir, "capture.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &onDisk))
	assert.Equal(t, ev.RAS.Missing, onDisk.RAS.Missing)
}

// The whole capture keeps to its budget when RAS does not answer.
func TestCaptureBudget(t *testing.T) {
	f := &hangtest.RAS{Silent: true}
	addr := f.Serve(t)
	start := time.Now()
	ev := Capture(context.Background(), Options{Dir: t.TempDir(), RASAddr: addr, Budget: 100 * time.Millisecond, StacksOff: "py-spy is not installed"})
	assert.Less(t, time.Since(start), DefaultBudget)
	assert.NotEmpty(t, ev.RAS.Error)
	assert.Equal(t, "py-spy is not installed", ev.StacksOff)
}

// Under --user the evidence directory belongs to CMD's user, who may plant
// a link or a FIFO at a name Capture writes while ncclrun (root) captures:
// Capture must write through none of them (a root file overwritten with
// what RAS's socket, which CMD can serve, answered) and never block on one.
func TestCaptureWritesNoPlantedName(t *testing.T) {
	for _, tc := range []struct {
		name, planted string
		fifo          bool
	}{
		{"ras-status link", "ras-status.json", false},
		{"stacks link", "stacks-1000.txt", false},
		{"capture.json link", "capture.json", false},
		{"capture.json FIFO", "capture.json", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			victim := filepath.Join(t.TempDir(), "victim")
			require.NoError(t, os.WriteFile(victim, []byte("root's own\n"), 0o600))
			dir := t.TempDir()
			at := filepath.Join(dir, tc.planted)
			if tc.fifo {
				require.NoError(t, syscall.Mkfifo(at, 0o644))
			} else {
				require.NoError(t, os.Symlink(victim, at))
			}
			f := &hangtest.RAS{JSON: rasJSONReport}
			done := make(chan Evidence, 1)
			go func() {
				done <- Capture(context.Background(), Options{Dir: dir, RASAddr: f.Serve(t), PySpy: fakePySpy(t), PIDs: []int{1000}})
			}()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatalf("Capture blocked on the %s planted at %s", map[bool]string{true: "FIFO", false: "link"}[tc.fifo], tc.planted)
			}
			b, err := os.ReadFile(victim)
			require.NoError(t, err)
			assert.Equal(t, "root's own\n", string(b), "written through the link at %s", tc.planted)
		})
	}
}

// TestCaptureConfirmsLag: a rank behind in RAS's report is asked about
// again RASRecheck later: still behind with the same count, the report
// says so (Confirmed); moved on, it is no longer named.
func TestCaptureConfirmsLag(t *testing.T) {
	report := func(c0, c1 int) string {
		return fmt.Sprintf(`{"nccl_version": "2.28.9", "communicators": [{"hash": "0x1", "ranks": [
			{"rank": 0, "host": "10.0.0.1", "pid": 10, "collective_counts": {"AllReduce": %d}},
			{"rank": 1, "host": "10.0.0.1", "pid": 11, "collective_counts": {"AllReduce": %d}}], "missing_ranks": []}]}`, c0, c1)
	}
	for _, c := range []struct {
		name      string
		then      string
		confirmed bool
		behind    int
	}{
		{"stays", report(6, 5), true, 1},
		{"moves on", report(7, 6), false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &hangtest.RAS{JSON: report(6, 5), Then: c.then}
			ev := Capture(context.Background(), Options{RASAddr: f.Serve(t), StacksOff: "off"})
			require.NotNil(t, ev.RAS)
			assert.Equal(t, c.confirmed, ev.RAS.Confirmed)
			assert.Len(t, ev.RAS.Behind, c.behind)
			if !c.confirmed {
				assert.Contains(t, ev.RAS.Recheck, "moved on")
			}
			for i := 0; i < 2; i++ {
				select {
				case cmds := <-f.Got:
					assert.Contains(t, cmds, "STATUS", "query %d", i+1)
				case <-time.After(10 * time.Second):
					t.Fatalf("query %d never came", i+1)
				}
			}
		})
	}
}

// TestConfirmBehindWithoutSecondReport: a second query that failed
// leaves the first report's lag, unconfirmed, and says why.
func TestConfirmBehindWithoutSecondReport(t *testing.T) {
	first := RASStatus{Format: "json", Behind: []RASBehind{{Comm: "0x1", Op: "AllReduce", Max: 6, Ranks: []RASRank{{Comm: "0x1", Rank: 1, Count: 5}}}}}
	got := ConfirmBehind(first, RASStatus{Error: "connection refused"})
	assert.False(t, got.Confirmed)
	assert.Equal(t, first.Behind, got.Behind)
	assert.Contains(t, got.Recheck, "connection refused")
}
