package preflight

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWriteChecksWritesASharedFixOnce(t *testing.T) {
	r := Report{Checks: []Result{
		{ID: "memlock", Status: Fail, Summary: "low", Fix: "raise it"},
		{ID: "capabilities", Status: Fail, Summary: "no cap", Fix: "raise it"},
		{ID: "shm", Status: Warn, Summary: "small", Fix: "grow it"},
		{ID: "gpu", Status: OK, Summary: "fine", Fix: "unused"},
	}}
	var b bytes.Buffer
	require.NoError(t, r.WriteChecks(&b, Warn, Fail))
	assert.Equal(t, "ncclrun: memlock: low\nncclrun:   fix: raise it\n"+
		"ncclrun: capabilities: no cap\n"+
		"ncclrun: shm: small\nncclrun:   fix: grow it\n", b.String())
}
