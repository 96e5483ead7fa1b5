package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCachedFlagNames: every flag keeps its names, its type's other methods
// (help text) and its place, and a second Names returns the same slice.
func TestCachedFlagNames(t *testing.T) {
	plain, cached := newApp(&env{}), newApp(&env{})
	cacheFlagNames(cached)
	require.Len(t, cached.Commands, len(plain.Commands))
	for i, c := range cached.Commands {
		p := plain.Commands[i]
		require.Len(t, c.Flags, len(p.Flags), c.Name)
		for j, f := range c.Flags {
			assert.Equal(t, p.Flags[j].Names(), f.Names(), "%s flag %d", c.Name, j)
			assert.Equal(t, p.Flags[j].String(), f.String(), "%s flag %d help", c.Name, j)
			if n := f.Names(); len(n) > 0 {
				assert.Same(t, &n[0], &f.Names()[0], "%s flag %d computed once", c.Name, j)
			}
		}
	}
}
