package testutil

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestNetnsNames(t *testing.T) {
	out := []byte("sl-12-0-1 (id: 3)\nncclrun-mn-7-sw\n\n  \nplain\n")
	assert.Equal(t, []string{"sl-12-0-1", "ncclrun-mn-7-sw", "plain"}, netnsNames(out))
	assert.Empty(t, netnsNames(nil))
}
