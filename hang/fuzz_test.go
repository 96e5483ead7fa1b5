package hang

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// FuzzReadDump: whatever the bytes, ReadDump returns (no panic, no
// runaway allocation: the fuzzer's memory limit catches one) and a dump it
// reads has its groups within bounds.
func FuzzReadDump(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("testdata", "flightrecorder", "*_rank_*"))
	for _, s := range seeds {
		if b, err := os.ReadFile(s); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("\x80\x02X\xf0\xff\xff\xff"))
	f.Add([]byte("\x80\x02}(N" + "u."))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := ReadDump(bytes.NewReader(b))
		if err != nil {
			return
		}
		if len(d.PGs) > maxPGs {
			t.Fatalf("%d groups", len(d.PGs))
		}
		for _, pg := range d.PGs {
			if len(pg.Stalled) > MaxStalled {
				t.Fatalf("%d stalled entries", len(pg.Stalled))
			}
		}
	})
}
