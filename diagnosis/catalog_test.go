package diagnosis

import (
	"bufio"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tableIDs returns the ids of the "| `id` | meaning |" rows of the markdown
// tables under the heading that starts with section ("## Diagnosis ids"),
// up to the next heading of that level or above.
func tableIDs(t *testing.T, path, section string) map[string]bool {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	row := regexp.MustCompile("^\\| `([a-z0-9-]+)` \\|")
	ids := map[string]bool{}
	sc := bufio.NewScanner(f)
	in := false
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			in = strings.HasPrefix(line, section)
			continue
		}
		if m := row.FindStringSubmatch(line); in && m != nil {
			ids[m[1]] = true
		}
	}
	require.NoError(t, sc.Err())
	return ids
}

func TestShippedCatalogLoads(t *testing.T) {
	c, err := ParseCatalogFS(shippedCatalog)
	require.NoError(t, err)
	seen := map[string]bool{}
	for _, e := range c.Entries() {
		assert.False(t, seen[e.ID], "duplicate id %q", e.ID)
		seen[e.ID] = true
		assert.NotEmpty(t, e.Title, e.ID)
		assert.NotEmpty(t, e.Cause, e.ID)
		assert.NotEmpty(t, e.Fix, e.ID)
		assert.NotEmpty(t, e.Samples.Match, "entry %q needs positive samples", e.ID)
		assert.NotEmpty(t, e.Samples.NoMatch, "entry %q needs negative samples", e.ID)
	}
}

func TestCatalogIDsAgainstContract(t *testing.T) {
	contract := tableIDs(t, "../docs/contract.md", "## Diagnosis ids")
	added := tableIDs(t, "../docs/diagnosis.md", "## Ids")
	require.NotEmpty(t, contract, "no id table parsed from docs/contract.md")
	c := DefaultCatalog()
	for id := range contract {
		_, ok := c.Entry(id)
		assert.True(t, ok, "docs/contract.md id %q has no catalog entry", id)
	}
	for _, e := range c.Entries() {
		assert.True(t, contract[e.ID] || added[e.ID], "catalog id %q is neither in docs/contract.md nor in docs/diagnosis.md's added ids", e.ID)
	}
}

// TestCatalogSamples checks every entry against its own samples: a Match
// sample gives the entry's id first, a NoMatch sample never gives it.
func TestCatalogSamples(t *testing.T) {
	for _, e := range DefaultCatalog().Entries() {
		f := e.SampleFacts.Facts()
		for _, s := range e.Samples.Match {
			ds, err := Explain(strings.NewReader(s), f)
			require.NoError(t, err)
			if assert.NotEmpty(t, ds, "%s: no diagnosis for %q", e.ID, s) {
				assert.Equal(t, e.ID, ds[0].ID, "%s: first diagnosis for %q", e.ID, s)
			}
		}
		for _, s := range e.Samples.NoMatch {
			ds, err := Explain(strings.NewReader(s), f)
			require.NoError(t, err)
			for _, d := range ds {
				assert.NotEqual(t, e.ID, d.ID, "%s: negative sample %q matched", e.ID, s)
			}
		}
	}
}

// TestPrefilterIsSound: for every sample line and every line of the logs
// under testdata (corpus, synthetic, healthy), any pattern whose regex
// matches also has one of its literals (derive.go) in the line, so the
// prefilter never hides a match.
func TestPrefilterIsSound(t *testing.T) {
	c := DefaultCatalog()
	lines := allTestLines(t)
	for _, p := range c.pats {
		for _, l := range lines {
			if !p.regexp().MatchString(l) {
				continue
			}
			found := false
			for _, lit := range p.Literals {
				found = found || strings.Contains(l, lit)
			}
			assert.True(t, found, "entry %q pattern %q matches %q but none of its literals %q", p.entry.ID, p.Name, l, p.Literals)
		}
	}
}

func TestEveryPatternHasAPositiveSample(t *testing.T) {
	c := DefaultCatalog()
	for _, p := range c.pats {
		hit := false
		for _, e := range c.Entries() {
			for _, s := range e.Samples.Match {
				for _, l := range strings.Split(s, "\n") {
					hit = hit || p.regexp().MatchString(l)
				}
			}
		}
		if p.entry.ID == "memory-registration" && p.Name == "dmesg" {
			hit = true // its sample is the dmesg line, checked under adequate facts
		}
		assert.True(t, hit, "entry %q pattern %q has no sample that matches it", p.entry.ID, p.Name)
	}
}

func TestNewCatalogErrors(t *testing.T) {
	base := func() Entry {
		return Entry{ID: "x", Title: "t", Cause: "c", Fix: "f", Patterns: []Pattern{{Name: "p", Re: "abc"}}}
	}
	tests := []struct {
		name   string
		mutate func(es []Entry) []Entry
		quote  string
	}{
		{"bad regex quoted", func(es []Entry) []Entry { es[0].Patterns[0].Re = "a(b"; return es }, `"a(b"`},
		{"bad negative", func(es []Entry) []Entry { es[0].Not = []string{"[z"}; return es }, `"[z"`},
		{"no literals", func(es []Entry) []Entry { es[0].Patterns[0].Re = "x*"; return es }, "no literal is in every match"},
		{"duplicate id", func(es []Entry) []Entry { return append(es, base()) }, `duplicate id "x"`},
		{"unknown marker", func(es []Entry) []Entry { es[0].Patterns[0].Requires = "nope"; return es }, `"nope" is not a marker`},
		{"bad certainty", func(es []Entry) []Entry { es[0].Certainty = "maybe"; return es }, `"maybe"`},
		{"no title", func(es []Entry) []Entry { es[0].Title = ""; return es }, "needs title"},
		{"no patterns", func(es []Entry) []Entry { es[0].Patterns = nil; return es }, "no patterns"},
		{"unknown entry in a marker name", func(es []Entry) []Entry { es[0].Patterns[0].SuppressedBy = []string{"zzz/m"}; return es }, `no entry "zzz"`},
		{"unknown marker in another entry", func(es []Entry) []Entry { es[0].Patterns[0].Requires = "x/m"; return es }, `"m" is not a marker of entry "x"`},
		{"multi_host on a non-marker", func(es []Entry) []Entry { es[0].Patterns[0].MultiHost = true; return es }, "multi_host needs marker"},
		{"unknown adequate marker", func(es []Entry) []Entry { es[0].AdequateMarker = "m"; return es }, `adequate_marker "m"`},
		{"unknown when", func(es []Entry) []Entry { es[0].Patterns[0].When = "always"; return es }, `unknown when "always"`},
		{"suppression cycle", func(es []Entry) []Entry {
			es[0].Patterns = append(es[0].Patterns,
				Pattern{Name: "m1", Re: "m1", Marker: true, SuppressedBy: []string{"m2"}},
				Pattern{Name: "m2", Re: "m2", Marker: true, SuppressedBy: []string{"m1"}})
			return es
		}, "cycle"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewCatalog(tt.mutate([]Entry{base()}))
			require.Error(t, err)
			assert.True(t, errors.Is(err, ErrCatalog))
			assert.Contains(t, err.Error(), tt.quote)
		})
	}
	_, err := ParseCatalog([]byte("{"))
	assert.ErrorIs(t, err, ErrCatalog)
	_, err = NewCatalog([]Entry{base()})
	assert.NoError(t, err)
}

func TestAhoCorasick(t *testing.T) {
	lits := []string{"he", "she", "his", "hers", "Cannot allocate memory"}
	owners := []int{0, 1, 2, 3, 4}
	a := newAhoCorasick(lits, owners)
	stamp := make([]uint32, 5)
	tests := []struct {
		in   string
		want []int32
	}{
		{"ushers", []int32{1, 0, 3}},
		{"nothing here", []int32{0}},
		{"xyz", nil},
		{"failed with error Cannot allocate memory", []int32{4}},
		{"Cannot allocate memor", nil},
		{"hishe", []int32{2, 1, 0}},
		// Past the automaton's acLen bytes a literal is compared in place.
		{"Cannot allocate", nil},
		{"Cannot aCannot allocate memory", []int32{4}},
		{"Cannot allocate memorCannot allocate memory", []int32{4}},
		{"xx Cannot allocate memoryy", []int32{4}},
	}
	for i, tt := range tests {
		got := a.scan([]byte(tt.in), stamp, uint32(i+1), nil)
		assert.ElementsMatch(t, tt.want, got, tt.in)
	}
}

// TestAhoCorasickExact: on every sample and test line, and each cut
// after every literal's first acLen bytes (where the automaton's part of
// it ends), the automaton reports exactly the patterns with a literal in
// the line.
func TestAhoCorasickExact(t *testing.T) {
	c := DefaultCatalog()
	a := c.automaton()
	stamp := make([]uint32, a.npattern)
	var lines []string
	for _, l := range allTestLines(t) {
		lines = append(lines, l)
		for _, lit := range c.lits {
			if i := strings.Index(l, lit); i >= 0 && len(lit) > acLen {
				lines = append(lines, l[:i+acLen], l[:i+len(lit)-1]+"x")
			}
		}
	}
	for i, l := range lines {
		var want []int32
		for k, lit := range c.lits {
			if strings.Contains(l, lit) && !slices.Contains(want, int32(c.owners[k])) {
				want = append(want, int32(c.owners[k]))
			}
		}
		assert.ElementsMatch(t, want, a.scan([]byte(l), stamp, uint32(i+1), nil), l)
	}
}

// TestParseCatalogFS: one entry per NNN-<id>.json file, in file-name
// order; anything else in the directory, a name that does not carry the
// entry's id, an unknown field or a second JSON value is an error that
// quotes the file.
func TestParseCatalogFS(t *testing.T) {
	entry := func(id string) string {
		return `{"id":"` + id + `","title":"t","cause":"c","fix":"f","patterns":[{"name":"p","re":"` + id + `"}],"samples":{"match":[],"no_match":[]}}`
	}
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	c, err := ParseCatalogFS(fstest.MapFS{"020-bb.json": file(entry("bb")), "010-zz.json": file(entry("zz")), "015-aa.json": file(entry("aa"))})
	require.NoError(t, err)
	var ids []string
	for _, e := range c.Entries() {
		ids = append(ids, e.ID)
	}
	assert.Equal(t, []string{"zz", "aa", "bb"}, ids, "file-name order")

	tests := []struct {
		name  string
		fsys  fstest.MapFS
		quote string
	}{
		{"no rank", fstest.MapFS{"aa.json": file(entry("aa"))}, `"aa.json" is not a regular file named NNN-<id>.json`},
		{"stray file", fstest.MapFS{"010-aa.json": file(entry("aa")), "README": file("x")}, `"README"`},
		{"id differs from the name", fstest.MapFS{"010-aa.json": file(entry("bb"))}, `010-aa.json: holds entry "bb", not "aa"`},
		{"unknown field", fstest.MapFS{"010-aa.json": file(`{"id":"aa","titel":"t"}`)}, `010-aa.json: json: unknown field "titel"`},
		{"two values", fstest.MapFS{"010-aa.json": file(entry("aa") + entry("aa"))}, "010-aa.json: more than one JSON value"},
		{"bad json", fstest.MapFS{"010-aa.json": file(`{"id":`)}, "010-aa.json"},
		{"subdirectory", fstest.MapFS{"010-aa.json/x": file("")}, `"010-aa.json" is not a regular file`},
		{"duplicate id across ranks", fstest.MapFS{"010-aa.json": file(entry("aa")), "020-aa.json": file(entry("aa"))}, `duplicate id "aa"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseCatalogFS(tt.fsys)
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrCatalog)
			assert.Contains(t, err.Error(), tt.quote)
		})
	}
}

// TestShippedCatalogFiles: every file of diagnosis/catalog/ is one entry
// and the one-document format ParseCatalog reads gives the same catalog.
func TestShippedCatalogFiles(t *testing.T) {
	des, err := fs.ReadDir(shippedCatalog, ".")
	require.NoError(t, err)
	c := DefaultCatalog()
	require.Len(t, c.Entries(), len(des))
	doc, err := json.Marshal(catalogFile{Version: 1, Entries: c.Entries()})
	require.NoError(t, err)
	c2, err := ParseCatalog(doc)
	require.NoError(t, err)
	assert.Equal(t, c.Entries(), c2.Entries())
}
