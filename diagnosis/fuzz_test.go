package diagnosis

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// corpusLines returns the lines of the corpus copy, the healthy logs and
// the synthetic red-team logs and the blind suite, as fuzz seeds.
func corpusLines(f *testing.F) [][]byte {
	var out [][]byte
	for _, glob := range []string{"testdata/corpus/*.log", "testdata/healthy/*.log", "testdata/synthetic/*.log", "testdata/blind/*.log"} {
		paths, _ := filepath.Glob(glob)
		for _, p := range paths {
			for _, l := range logLines(f, p) {
				out = append(out, []byte(l))
			}
		}
	}
	return out
}

func checkInvariants(t *testing.T, ds []Diagnosis, maxLines int) {
	t.Helper()
	seen := map[string]bool{}
	for _, d := range ds {
		if seen[d.ID] {
			t.Fatalf("id %q twice", d.ID)
		}
		seen[d.ID] = true
		if d.Lines < 1 || d.Count < 1 || d.Count > d.Lines || d.Lines > maxLines {
			t.Fatalf("%s: count %d lines %d (max %d)", d.ID, d.Count, d.Lines, maxLines)
		}
		if !sort.StringsAreSorted(d.Hosts) {
			t.Fatalf("%s: hosts not sorted: %q", d.ID, d.Hosts)
		}
		for i := 1; i < len(d.Hosts); i++ {
			if d.Hosts[i] == d.Hosts[i-1] {
				t.Fatalf("%s: duplicate host %q", d.ID, d.Hosts[i])
			}
		}
		if d.Certainty != Certain && d.Certainty != Likely {
			t.Fatalf("%s: certainty %q", d.ID, d.Certainty)
		}
		if len(d.FirstLine) > maxFirstLine || strings.ToValidUTF8(d.FirstLine, "") != d.FirstLine {
			t.Fatalf("%s: bad first line %q", d.ID, d.FirstLine)
		}
	}
}

func FuzzParseLine(f *testing.F) {
	for _, l := range corpusLines(f) {
		f.Add(l)
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		l := ParseLine(line)
		if l.Start >= 0 {
			if l.Start > len(line) || l.Level == "" {
				t.Fatalf("start %d level %q for %q", l.Start, l.Level, line)
			}
		} else if l.Loc != "" || l.Time != "" || l.Dev != -1 {
			t.Fatalf("prefix fields without a prefix: %+v", l)
		}
		if l.PID < 0 || len(l.Msg) > len(line) {
			t.Fatalf("bad line %+v for %q", l, line)
		}
	})
}

func FuzzFeed(f *testing.F) {
	for _, l := range corpusLines(f) {
		f.Add(l)
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		m := NewMatcher(Facts{})
		d := m.Feed(line)
		ds := m.Diagnoses()
		checkInvariants(t, ds, 1)
		if d != nil && len(ds) == 0 {
			t.Fatalf("Feed announced %q but Diagnoses is empty", d.ID)
		}
		if m.Feed(line) != nil {
			t.Fatalf("the same line announced twice")
		}
	})
}

func FuzzExplain(f *testing.F) {
	paths, _ := filepath.Glob("testdata/corpus/*.log")
	synthetic, _ := filepath.Glob("testdata/synthetic/*.log")
	blind, _ := filepath.Glob("testdata/blind/*.log")
	for _, p := range append(append(paths, synthetic...), blind...) {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, log []byte) {
		ds, err := Explain(bytes.NewReader(log), Facts{})
		if err != nil {
			t.Fatal(err)
		}
		checkInvariants(t, ds, bytes.Count(log, []byte("\n"))+1)
		_ = TerminationMessage(ds, 4096)
		ds2, _ := Explain(bytes.NewReader(log), Facts{Known: true, MemlockAdequate: true, ShmBytes: 1 << 26})
		checkInvariants(t, ds2, bytes.Count(log, []byte("\n"))+1)
	})
}
