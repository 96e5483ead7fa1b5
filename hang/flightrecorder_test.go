package hang

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The dumps under testdata/flightrecorder are written by gen.py from the
// flight recorder's schema, one a torch release: rank 1 of two, stuck in
// all_reduce 6 of PG 0 with a broadcast 7 queued after it.
func TestReadDumpEveryVersion(t *testing.T) {
	stuck := []FREntry{
		{Seq: 6, Op: "nccl:all_reduce", State: "scheduled", InputSizes: [][]int64{{1024}}, OutputSizes: [][]int64{{1024}}},
		{Seq: 7, Op: "nccl:broadcast", State: "scheduled", InputSizes: [][]int64{{8}}, OutputSizes: [][]int64{{8}}},
	}
	tests := []struct {
		torch, format string
		entries       int
		started       int64
		dtypes        bool
		timeout       int64
	}{
		{"2.3", "2.3", 7, 5, false, 0},
		{"2.4", "2.4", 8, -1, true, 0},
		{"2.5", "2.5", 8, -1, true, 600000},
		{"2.6", "2.5", 8, -1, true, 600000},
		{"2.7", "2.7", 8, -1, true, 600000},
		{"2.8", "2.7", 8, -1, true, 600000},
		{"2.9", "2.7", 8, -1, true, 600000},
		{"2.10", "2.10", 8, 6, true, 600000},
	}
	for _, tt := range tests {
		t.Run(tt.torch, func(t *testing.T) {
			f, err := os.Open(filepath.Join("testdata", "flightrecorder", "torch-"+tt.torch+"_rank_1"))
			require.NoError(t, err)
			defer f.Close()
			d, err := ReadDump(f)
			require.NoError(t, err)
			want := make([]FREntry, len(stuck))
			for i, e := range stuck {
				e.TimeoutMs = tt.timeout
				if tt.dtypes {
					e.Dtypes = []string{"Float"}
				}
				want[i] = e
			}
			assert.Equal(t, Dump{
				Rank: -1, Version: tt.format, Entries: tt.entries,
				PGs: []PGTrace{{
					PG: "0", Name: "0", Desc: "default_pg", Ranks: "[0, 1]",
					LastEnqueued: 7, LastStarted: tt.started, LastCompleted: 5,
					Stalled: want, status: tt.torch != "2.3",
				}},
			}, d)
		})
	}
}

func TestReadDumpsNamesRanks(t *testing.T) {
	dir := t.TempDir()
	src, err := os.ReadFile(filepath.Join("testdata", "flightrecorder", "torch-2.10_rank_1"))
	require.NoError(t, err)
	for _, n := range []string{"fr_rank_1", "fr_rank_12", "fr_rank_x", "other_3"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, n), src, 0o644))
	}
	require.NoError(t, os.Symlink(filepath.Join(dir, "fr_rank_1"), filepath.Join(dir, "fr_rank_5")))
	ds := ReadDumps(context.Background(), filepath.Join(dir, "fr_rank_"))
	require.Len(t, ds, 2, "a link and names without a rank suffix are not dumps")
	assert.Equal(t, 1, ds[0].Rank)
	assert.Equal(t, 12, ds[1].Rank)
	assert.Equal(t, int64(5), ds[1].PGs[0].LastCompleted)
	assert.Empty(t, ds[1].Error)
}

// The dumps' directory is CMD's (its user's under --user) and may hold
// any number of names: at most maxDumpEntries of its entries are looked
// at, so that ncclrun's memory and time stay bounded whatever is there.
func TestReadDumpsLooksAtBoundedEntries(t *testing.T) {
	for _, tc := range []struct {
		files, entries, most int
	}{
		{20, 10, 10},
		{5, 10, 5},
	} {
		t.Run(fmt.Sprintf("%d files, %d entries", tc.files, tc.entries), func(t *testing.T) {
			old := maxDumpEntries
			maxDumpEntries = tc.entries
			t.Cleanup(func() { maxDumpEntries = old })
			dir := t.TempDir()
			for i := range tc.files {
				require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("fr_rank_%d", i)), []byte("not a pickle"), 0o644))
			}
			ds := ReadDumps(context.Background(), filepath.Join(dir, "fr_rank_"))
			assert.Len(t, ds, tc.most)
		})
	}
}

// Bad input: truncated and hostile pickles end in an error, quickly and
// without a large allocation; none panics.
func TestReadDumpBadInput(t *testing.T) {
	files := map[string]string{}
	for _, n := range []string{"truncated_rank_1", "hostile-frame", "hostile-length", "hostile-length8", "hostile-setitems", "hostile-string"} {
		b, err := os.ReadFile(filepath.Join("testdata", "flightrecorder", n))
		require.NoError(t, err)
		files[n] = string(b)
	}
	files["marks"] = "\x80\x02" + string(bytes.Repeat([]byte("("), 1_000_000)) + "."
	files["dicts"] = "\x80\x02" + string(bytes.Repeat([]byte("}"), 4_000_000)) + "."
	files["nones"] = "\x80\x02" + string(bytes.Repeat([]byte("N"), MaxDumpSize-3)) + "."
	files["long"] = "L" + string(bytes.Repeat([]byte("9"), 1_000_000)) + "L\n."
	files["oversize"] = string(bytes.Repeat([]byte("N"), MaxDumpSize+1))
	files["empty"] = ""
	for name, in := range files {
		t.Run(name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			start := time.Now()
			d, err := ReadDump(bytes.NewReader([]byte(in)))
			runtime.ReadMemStats(&after)
			if err == nil {
				assert.NotEmpty(t, d.Error, "a pickle that is not a dump says so")
			}
			assert.Less(t, time.Since(start), 5*time.Second)
			assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(3*MaxDumpSize+64<<20), "allocated")
		})
	}
}
