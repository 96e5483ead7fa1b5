package lazy

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRegexpCompiledOnceOnFirstGet(t *testing.T) {
	word := &Regexp{Expr: `^[a-z]+$`}
	require.Nil(t, word.re, "nothing compiled before the first Get")
	re := word.Get()
	require.NotNil(t, re)
	assert.True(t, re.MatchString("abc"))
	assert.Same(t, re, word.Get(), "compiled once")
}

// An expression that does not compile panics on every Get, not only the
// first (a recovered first panic must not leave a nil expression behind).
func TestRegexpThatDoesNotCompilePanicsEveryTime(t *testing.T) {
	bad := &Regexp{Expr: `(`}
	assert.Panics(t, func() { bad.Get() })
	assert.Panics(t, func() { bad.Get() })
}

func TestValueMadeOnceOnFirstGet(t *testing.T) {
	made := 0
	table := &Value[[]string]{New: func() []string { made++; return []string{"a", "b"} }}
	require.Zero(t, made, "nothing made before the first Get")
	assert.Equal(t, []string{"a", "b"}, table.Get())
	table.Get()
	assert.Equal(t, 1, made)
}

func TestValuePanicsEveryTime(t *testing.T) {
	calls := 0
	v := &Value[int]{New: func() int { calls++; panic("no table") }}
	assert.PanicsWithValue(t, "no table", func() { v.Get() })
	assert.PanicsWithValue(t, "no table", func() { v.Get() })
	assert.Equal(t, 1, calls, "made once")
}
