package diagnosis

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCatalogPatternsHaveSamples: every pattern of the shipped catalog is
// exercised by its own entry's samples: a line of a Match sample matches a
// sighting pattern's expression, and a marker's expression matches a line
// of some entry's samples (markers are read across entries). A pattern
// added without a sample fails here; TestCatalogSamples then checks what
// the samples give.
func TestCatalogPatternsHaveSamples(t *testing.T) {
	c, err := ParseCatalogFS(shippedCatalog)
	require.NoError(t, err)
	lines := func(samples []string) []string {
		var out []string
		for _, s := range samples {
			out = append(out, strings.Split(s, "\n")...)
		}
		return out
	}
	var all []string
	for _, e := range c.Entries() {
		all = append(all, lines(e.Samples.Match)...)
		all = append(all, lines(e.Samples.NoMatch)...)
	}
	for _, cp := range c.pats {
		pool := all
		if !cp.Marker {
			own, _ := c.Entry(cp.entry.ID)
			pool = lines(own.Samples.Match)
		}
		found := false
		for _, l := range pool {
			if cp.regexp().MatchString(l) {
				found = true
				break
			}
		}
		assert.True(t, found, "pattern %s/%s (%q) has no sample line that it matches", cp.entry.ID, cp.Name, cp.Re)
	}
}
