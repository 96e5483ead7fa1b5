//go:build rdma

package rdma

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseConsole(t *testing.T) {
	console := "[    1.0] kernel noise\r\n" +
		"@@@ BEGIN a\r\n@@@ PART stdout\r\nline 1\r\n\r\n@@@ PART stderr\r\n\r\n@@@ END a rc=3\r\n" +
		"[    2.0] more noise\r\n" +
		"@@@ BEGIN b\r\n@@@ END b rc=0\r\n"
	got, err := parseConsole(strings.NewReader(console))
	require.NoError(t, err)
	assert.Equal(t, map[string]block{
		"a": {parts: map[string]string{"stdout": "line 1\n", "stderr": ""}, rc: 3},
		"b": {parts: map[string]string{}, rc: 0},
	}, got)

	_, err = parseConsole(strings.NewReader("@@@ BEGIN a\n@@@ END b rc=0\n"))
	assert.ErrorContains(t, err, `malformed end of block "a"`)
}
