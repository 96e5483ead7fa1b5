package nccllog

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ncclrun/ncclrun/internal/cmdkind"
)

func TestParseTorchrunError(t *testing.T) {
	te := ParseTorchrunError([]byte(`{"message": {"message": "ValueError: x", "extraInfo": {"py_callstack": "tb", "timestamp": "17"}}, "errorCode": -9}`))
	require.NotNil(t, te)
	require.Equal(t, "ValueError: x", te.Message)
	require.Equal(t, "tb", te.Traceback)
	require.Equal(t, "17", te.Timestamp)
	require.Equal(t, -9, *te.ErrorCode)

	te = ParseTorchrunError([]byte(`{"message": {"message": "E", "extraInfo": {"timestamp": 1700000000}}}`))
	require.Equal(t, "1700000000", te.Timestamp)
	te = ParseTorchrunError([]byte(`{"message": "plain"}`))
	require.Equal(t, "plain", te.Message)
	require.Nil(t, ParseTorchrunError([]byte(`not json`)))
	require.Nil(t, ParseTorchrunError([]byte(`{}`)))
}

// TestTorchrunErrorFirstFailing: torchrun's error file names a sibling's lost
// connection (torch 1.13 orders by whole seconds) while the output showed the
// program's exception first: the report's torchrun_error is the exception.
func TestTorchrunErrorFirstFailing(t *testing.T) {
	const exc = "RuntimeError: rank 3 failed on purpose"
	const lost = "RuntimeError: [./gloo/transport/tcp/pair.cc:598] Connection closed by peer [198.18.0.2]:17069"
	one := 1
	torch := func(msg string) *TorchrunError {
		return &TorchrunError{Message: msg, Traceback: "Traceback ...", Timestamp: "1764650219", ErrorCode: &one}
	}
	tests := []struct {
		name      string
		te        *TorchrunError
		exception string
		want      string
	}{
		{"torch named the knock-on", torch(lost), exc, exc},
		{"torch named the exception", torch(exc), exc, exc},
		{"nothing seen", torch(lost), "", lost},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.te.FirstFailing(tt.exception)
			require.NotNil(t, got)
			assert.Equal(t, tt.want, got.Message)
			assert.Equal(t, &one, got.ErrorCode)
		})
	}
	assert.Nil(t, (*TorchrunError)(nil).FirstFailing(exc))
}

// TestTorchFile: the user's TORCHELASTIC_ERROR_FILE is used as set (an
// empty one means none); otherwise only torchrun is asked for one, in a
// directory of its own that cleanup removes.
func TestTorchFile(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, path string
		env        []string
		want       string
	}{
		{"the user's", "python3", []string{"TORCHELASTIC_ERROR_FILE=" + dir + "/err.json"}, dir + "/err.json"},
		{"the user's empty one", "torchrun", []string{"TORCHELASTIC_ERROR_FILE="}, ""},
		{"not torchrun", "python3", nil, ""},
	} {
		path, ask, cleanup := TorchFile(tc.env, cmdkind.Command{Path: tc.path}, false)
		assert.Equal(t, tc.want, path, tc.name)
		assert.Nil(t, ask, tc.name)
		cleanup()
	}
	path, ask, cleanup := TorchFile(nil, cmdkind.Command{Path: "/usr/bin/torchrun"}, false)
	require.NotNil(t, ask)
	assert.Equal(t, "TORCHELASTIC_ERROR_FILE", ask.Name)
	assert.Equal(t, path, ask.Value)
	assert.DirExists(t, filepath.Dir(path))
	cleanup()
	assert.NoDirExists(t, filepath.Dir(path))
}
