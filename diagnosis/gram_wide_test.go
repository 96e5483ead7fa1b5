package diagnosis

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGramWideSameAsScalar: firstHit (with the vector path where the CPU
// has one) returns what the scalar loop returns, for the catalog's filter
// and for a healthy job's (its markers seen), over every test line and
// over chunks of them, at every alignment, and over random bytes with the
// grams planted at every offset of a block.
func TestGramWideSameAsScalar(t *testing.T) {
	healthy, _ := perfLines(t)
	m := NewMatcher(Facts{})
	for _, l := range healthy {
		m.FeedAll(l)
	}
	filters := map[string]*gramFilter{"catalog": DefaultCatalog().filter, "healthy job": m.filter}
	lines := allTestLines(t)
	var chunk strings.Builder
	for _, l := range lines {
		chunk.WriteString(l)
		chunk.WriteByte('\n')
	}
	big := []byte(chunk.String())
	rng := rand.New(rand.NewPCG(1, 2))
	var grams []uint32
	for _, p := range DefaultCatalog().pats {
		grams = append(grams, p.grams...)
	}
	for name, f := range filters {
		check := func(b []byte, what string) {
			t.Helper()
			require.Equal(t, f.firstHitScalar(b), f.firstHit(b), "%s: %s (%d bytes)", name, what, len(b))
		}
		for _, l := range lines {
			check([]byte(l), l)
		}
		for off := 0; off < 64; off++ {
			check(big[off:], "all lines")
		}
		for i := 0; i+4096 < len(big) && i < 1<<20; i += 4093 {
			check(big[i:i+4096], "a slice of the lines")
		}
		for _, g := range grams {
			for at := 0; at < 70; at++ {
				b := make([]byte, 40+rng.IntN(200))
				for k := range b {
					b[k] = byte(' ' + rng.IntN(95))
				}
				if at+4 <= len(b) {
					b[at], b[at+1], b[at+2], b[at+3] = byte(g), byte(g>>8), byte(g>>16), byte(g>>24)
				}
				check(b, "random bytes with a gram")
			}
		}
	}
}
