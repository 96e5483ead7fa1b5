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

func FuzzLineSplitter(f *testing.F) {
	f.Add([]byte("a\nb\r\nc"), uint16(3))
	f.Add(bytes.Repeat([]byte("x"), MaxLine+10), uint16(7000))
	f.Add([]byte("\n\n\n"), uint16(1))
	f.Fuzz(func(t *testing.T, data []byte, chunk uint16) {
		var got [][]byte
		l := &lineSplitter{s: Stdout, emit: func(_ Stream, line []byte) {
			if len(line) > MaxLine || bytes.IndexByte(line, '\n') >= 0 {
				t.Fatalf("bad line of %d bytes", len(line))
			}
			got = append(got, append([]byte(nil), line...))
		}}
		n := int(chunk)%4096 + 1
		for p := data; len(p) > 0; {
			k := min(n, len(p))
			l.feed(p[:k])
			p = p[k:]
		}
		l.flush()
		if cap(l.buf) > MaxLine {
			t.Fatalf("buffer grew to %d", cap(l.buf))
		}
		// Every line is delivered: whole when short, cut to MaxLine when long.
		want := bytes.Split(data, []byte("\n"))
		if len(want) > 0 && len(want[len(want)-1]) == 0 {
			want = want[:len(want)-1]
		}
		var nonEmpty [][]byte
		for _, w := range want {
			if len(w) > MaxLine {
				w = w[:MaxLine]
			}
			nonEmpty = append(nonEmpty, w)
		}
		if len(got) != len(nonEmpty) {
			t.Fatalf("%d lines, want %d", len(got), len(nonEmpty))
		}
		for i := range got {
			if !bytes.Equal(got[i], nonEmpty[i]) {
				t.Fatalf("line %d: %q, want %q", i, got[i], nonEmpty[i])
			}
		}
	})
}
