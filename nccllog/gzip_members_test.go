package nccllog

import (
	"bytes"
	"compress/gzip"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGzipMembers: what follows a gzip member is read as gzip does: further
// members are decompressed in turn, zero bytes up to the end (a tape's or
// dd's block padding) are ignored, anything else is a read error, and a
// member cut short is one.
func TestGzipMembers(t *testing.T) {
	a, b := []byte("NCCL WARN one\n"), []byte("NCCL WARN two\n")
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	ga, gb := gzipBytes(t, a), gzipBytes(t, b)
	for _, tc := range []struct {
		name    string
		in      []byte
		want    string
		wantErr error
	}{
		{"one member", ga, string(a), nil},
		{"two members", cat(ga, gb), string(a) + string(b), nil},
		{"zero padding", cat(ga, make([]byte, 512)), string(a), nil},
		{"members then zero padding", cat(ga, gb, make([]byte, 3)), string(a) + string(b), nil},
		{"one zero byte", cat(ga, []byte{0}), string(a), nil},
		{"garbage", cat(ga, []byte("trailing junk after the member\n")), string(a), gzip.ErrHeader},
		{"zeros then garbage", cat(ga, make([]byte, 8), []byte("trailing junk after the member\n")), string(a), gzip.ErrHeader},
		{"truncated second member", cat(ga, gb[:len(gb)-6]), "", io.ErrUnexpectedEOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, err := Open("-", bytes.NewReader(tc.in))
			require.NoError(t, err)
			defer in.Close()
			got, err := io.ReadAll(in)
			if tc.wantErr == nil {
				require.NoError(t, err)
				assert.Equal(t, tc.want, string(got))
				return
			}
			var re *ReadError
			require.ErrorAs(t, err, &re)
			assert.ErrorIs(t, err, tc.wantErr)
			assert.True(t, bytes.HasPrefix(got, []byte(tc.want)))
		})
	}
}
