package lazy

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var made int

// Package-level, as the project declares them.
var (
	word  = &Regexp{Expr: `^[a-z]+$`}
	bad   = &Regexp{Expr: `(`}
	table = &Value[[]string]{New: func() []string { made++; return []string{"a", "b"} }}
)

func TestRegexpCompiledOnceOnFirstGet(t *testing.T) {
	require.Nil(t, word.re, "nothing compiled before the first Get")
	re := word.Get()
	require.NotNil(t, re)
	assert.True(t, re.MatchString("abc"))
	assert.Same(t, re, word.Get(), "compiled once")
	assert.Panics(t, func() { bad.Get() }, "an expression that does not compile panics, as MustCompile does")
}

func TestValueMadeOnceOnFirstGet(t *testing.T) {
	require.Zero(t, made, "nothing made before the first Get")
	assert.Equal(t, []string{"a", "b"}, table.Get())
	table.Get()
	assert.Equal(t, 1, made)
}
