package diagnosis

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestFailureException: only a failure outside the catalog is the
// program's exception (what torchrun's error file is checked against).
func TestFailureException(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    *Failure
		want string
	}{
		{"the program's exception", &Failure{Line: "RuntimeError: x"}, "RuntimeError: x"},
		{"a catalog cause", &Failure{ID: "peer-lost", Line: "Connection closed"}, ""},
		{"none", nil, ""},
	} {
		assert.Equal(t, tc.want, tc.f.Exception(), tc.name)
	}
}
