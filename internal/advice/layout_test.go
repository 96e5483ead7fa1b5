package advice

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestLayoutPutsEachAlternativeOnALine(t *testing.T) {
	assert.Equal(t, "fix: do A\n     or do B\n     or do C", Layout("do A; or do B; or do C", "fix: ", "     "))
	assert.Equal(t, "fix: only one; with a semicolon", Layout("only one; with a semicolon", "fix: ", "     "))
}
