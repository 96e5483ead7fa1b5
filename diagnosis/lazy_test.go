package diagnosis

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLazyCatalog: the lazily compiled catalog compiles a pattern's
// expressions when a line first reaches it, and only then; its results
// are the eager catalog's (TestFastPathSameResults and the suites run on
// DefaultCatalog, which is lazy); ParseCatalogFS compiles the shipped
// catalog eagerly, so a broken expression fails the tests, never a run.
func TestLazyCatalog(t *testing.T) {
	_, err := ParseCatalogFS(shippedCatalog)
	require.NoError(t, err, "every expression of the shipped catalog compiles")

	c, err := parseCatalogFS(shippedCatalog, true)
	require.NoError(t, err)
	compiled := func() (n int) {
		for _, p := range c.pats {
			if p.re != nil {
				n++
			}
		}
		return n
	}
	require.Zero(t, compiled(), "nothing compiled before a line")
	m := NewMatcherWith(c, Facts{})
	m.FeedAll([]byte("epoch 1 loss 0.25"))
	require.Nil(t, c.ac, "no automaton for a line the gram filter rejects")
	m.FeedAll([]byte("gpu-node-01:31010:31107 [2] NCCL INFO Channel 25/0 : 10[2] -> 11[3] via P2P/CUMEM/read"))
	d := m.FeedAll([]byte("host:1:2 [0] misc/ibvwrap.cc:190 NCCL WARN Call to ibv_reg_mr failed with error Cannot allocate memory"))
	require.NotEmpty(t, d)
	assert.Equal(t, "memlock", d[0].ID)
	assert.Positive(t, compiled())
	assert.NotNil(t, c.ac)
	assert.Less(t, compiled()*4, len(c.pats), "%d of %d patterns compiled for two lines", compiled(), len(c.pats))

	// A broken expression is an error, lazily too: its literals are
	// derived from it when the catalog is built.
	bad := []Entry{{ID: "x", Title: "t", Cause: "c", Fix: "f", Patterns: []Pattern{{Name: "p", Re: "oops("}}}}
	_, err = NewCatalog(bad)
	require.ErrorIs(t, err, ErrCatalog)
	_, err = newCatalog(bad, true)
	require.ErrorIs(t, err, ErrCatalog)
	assert.Contains(t, err.Error(), "missing closing )")
}
