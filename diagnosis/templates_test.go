package diagnosis

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// memlockHow is the shipped memlock entry's unknown_how (TestFacts).
var memlockHow = func() string {
	e, _ := DefaultCatalog().Entry("memlock")
	return e.UnknownHow
}()

// TestFactSentencesAreCatalogData: the sentences that name run's facts,
// the knock-on wording and the generic entry's hiding and hold-back come
// from the catalog, not from Go: a catalog that changes them changes the
// output.
func TestFactSentencesAreCatalogData(t *testing.T) {
	require.NotEmpty(t, memlockHow)
	base := Entry{ID: "x", Title: "t", Cause: "plain cause.", Fix: "f", Priority: 60,
		Patterns: []Pattern{{Name: "p", Re: `XWARN`}}}
	ko := Entry{ID: "k", Title: "t", Cause: "knock cause.", Fix: "f", Priority: 40, KnockOn: true,
		KnockOnNote: "After {failure}.", Patterns: []Pattern{{Name: "p", Re: `KWARN`}}}
	gen := Entry{ID: "g", Title: "t", Cause: "generic.", Fix: "f", Priority: 10, Generic: true, HiddenBy: 70, HeldBack: true,
		Patterns: []Pattern{{Name: "p", Re: `GWARN`}}}
	withFacts := base
	withFacts.FactCause = "ran with {seen}."
	withFacts.FactNote = "shm {shm_size}, ports {rdma_ports}."
	c, err := NewCatalog([]Entry{withFacts, ko, gen})
	require.NoError(t, err)
	run := func(f Facts, log string) []Diagnosis {
		m := NewMatcherWith(c, f)
		require.NoError(t, FeedReader(m, strings.NewReader(log)))
		return m.Diagnoses()
	}
	ds := run(Facts{}, "XWARN\n")
	assert.Equal(t, "plain cause.", ds[0].Cause, "no facts: the plain text")
	ds = run(Facts{Known: true, Seen: "memlock 64 KiB", ShmBytes: 64 << 20, RDMAPorts: []string{"mlx5_0:1"}}, "XWARN\n")
	assert.Equal(t, "ran with memlock 64 KiB. shm 64 MiB, ports mlx5_0:1.", ds[0].Cause)
	ds = run(Facts{Known: true, Seen: "memlock 64 KiB", ShmBytes: 64 << 20}, "XWARN\n")
	assert.Equal(t, "ran with memlock 64 KiB.", ds[0].Cause, "a note naming an unknown fact is left out")

	ds = run(Facts{}, "XWARN\nKWARN\nGWARN\n")
	assert.Equal(t, []string{"x", "k", "g"}, ids(ds), "priority 60 does not hide a generic entry hidden_by 70")
	assert.Equal(t, "After x. knock cause.", ds[1].Cause)
	assert.True(t, c.HeldBack("g"))
	assert.False(t, c.HeldBack("x"))
	assert.False(t, c.HeldBack("nope"))

	for _, bad := range []Entry{
		{ID: "b", Title: "t", Cause: "c", Fix: "f", FactCause: "{nope}", Patterns: base.Patterns},
		{ID: "b", Title: "t", Cause: "c", Fix: "f", FactNote: "{seen", Patterns: base.Patterns},
		{ID: "b", Title: "t", Cause: "c", Fix: "f", FactNote: "{failure}", Patterns: base.Patterns},
		{ID: "b", Title: "t", Cause: "c", Fix: "f", KnockOn: true, Patterns: base.Patterns},
	} {
		_, err := NewCatalog([]Entry{bad})
		assert.ErrorIs(t, err, ErrCatalog, "%+v", bad)
	}
}

// TestShippedGenericHeldBack: the shipped catch-all is the one id run
// holds back, and failures from priority 50 hide it.
func TestShippedGenericHeldBack(t *testing.T) {
	var held []string
	for _, e := range DefaultCatalog().Entries() {
		if DefaultCatalog().HeldBack(e.ID) {
			held = append(held, e.ID)
		}
		if e.Generic {
			assert.Equal(t, 50, e.HiddenBy, e.ID)
		}
	}
	assert.Equal(t, []string{"nccl-error"}, held)
}
