package hang

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
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
