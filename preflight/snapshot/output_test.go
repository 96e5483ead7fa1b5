package snapshot

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseOutputKindsAndAnalyse(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		in, where, analyse string
	}{
		{"snap.tar.gz", "snap.tar.gz", "tar xzf snap.tar.gz && ncclrun doctor --root snap"},
		{"dir/it's.tgz", "dir/it's.tgz", `tar xzf 'dir/it'\''s.tgz' && ncclrun doctor --root 'it'\''s'`},
		{"out dir", "out dir", "ncclrun doctor --root 'out dir'"},
	} {
		o, err := ParseOutput(tc.in, now)
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.where, o.Where(), tc.in)
		assert.Equal(t, tc.analyse, o.Analyse(), tc.in)
	}
	o, err := ParseOutput("-", now)
	require.NoError(t, err)
	assert.Equal(t, "stdout", o.Where())
	assert.Regexp(t, `^tar xzf FILE && ncclrun doctor --root ncclrun-snapshot-.+-20260102-030405$`, o.Analyse())
	for _, bad := range []string{"x.tar", "x.zip", "x.tar.zst"} {
		_, err := ParseOutput(bad, now)
		assert.ErrorIs(t, err, ErrName, bad)
	}
}
