package diagnosis

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAutomatonScanCache: a scan with a cache finds in every line what a
// scan without one finds, whether the line's text is new, remembered, or
// was evicted by another that took its slot: every test line three times
// over, in an order that fills the cache many times, and from several
// offsets (the same line read from a later byte is another text).
func TestAutomatonScanCache(t *testing.T) {
	c := DefaultCatalog()
	lines := allTestLines(t)
	require.Greater(t, len(lines), scanCacheSlots, "too few lines to evict")
	plain, cached := newAutomatonScan(c), newAutomatonScan(c)
	cached.cache = new(scanCache)
	hits := 0
	for round := range 3 {
		for i, l := range lines {
			from := (i + round) % 3 * 5
			want := plain.run([]byte(l), from, nil)
			text := []byte(l)[min(from, len(l)):]
			before := string(cached.cache[hashBytes(text)&(scanCacheSlots-1)].text) == string(text)
			got := cached.run([]byte(l), from, []int32{-1})
			require.Equal(t, int32(-1), got[0], "dst's existing elements are kept")
			require.ElementsMatch(t, want, got[1:], "%q from %d, round %d", l, from, round)
			if before {
				hits++
			}
		}
	}
	require.Positive(t, hits, "no text was found in the cache")
}
