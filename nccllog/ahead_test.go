package nccllog

import (
	"bytes"
	"errors"
	"io"
	"math/rand"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"
)

// zeroReader returns (0, nil) for ever.
type zeroReader struct{}

func (zeroReader) Read([]byte) (int, error) { return 0, nil }

// TestAheadReader: what aheadReader reads is r's bytes in order, then r's
// error, whatever the sizes of r's reads and of the reader's; Close
// returns once the goroutine no longer reads r, also before the end.
func TestAheadReader(t *testing.T) {
	data := make([]byte, 3*aheadSize+12345)
	rand.New(rand.NewSource(1)).Read(data)
	boom := errors.New("boom")
	for name, tc := range map[string]struct {
		r    func() io.Reader
		want []byte
		err  error
	}{
		"empty":        {func() io.Reader { return bytes.NewReader(nil) }, nil, nil},
		"whole":        {func() io.Reader { return bytes.NewReader(data) }, data, nil},
		"one byte":     {func() io.Reader { return iotest.OneByteReader(bytes.NewReader(data[:70000])) }, data[:70000], nil},
		"eof and data": {func() io.Reader { return iotest.DataErrReader(bytes.NewReader(data)) }, data, nil},
		"error":        {func() io.Reader { return io.MultiReader(bytes.NewReader(data[:5]), iotest.ErrReader(boom)) }, data[:5], boom},
		"error later":  {func() io.Reader { return io.MultiReader(bytes.NewReader(data), iotest.ErrReader(boom)) }, data, boom},
		"truncated": {func() io.Reader {
			return io.MultiReader(bytes.NewReader(data[:3]), iotest.ErrReader(io.ErrUnexpectedEOF))
		}, data[:3], io.ErrUnexpectedEOF},
		"no progress": {func() io.Reader { return zeroReader{} }, nil, io.ErrNoProgress},
	} {
		for _, step := range []int{1, 4096, aheadSize + 1} {
			a := newAheadReader(tc.r())
			var got []byte
			buf := make([]byte, step)
			var err error
			for {
				var n int
				n, err = a.Read(buf)
				got = append(got, buf[:n]...)
				if err != nil {
					break
				}
			}
			require.NoError(t, a.Close())
			if tc.err == nil {
				require.ErrorIs(t, err, io.EOF, name)
			} else {
				require.ErrorIs(t, err, tc.err, name)
			}
			require.True(t, bytes.Equal(tc.want, got), "%s (reads of %d): %d bytes, want %d", name, step, len(got), len(tc.want))
		}
	}
	// Closed before the end: the goroutine stops.
	a := newAheadReader(bytes.NewReader(data))
	_, err := a.Read(make([]byte, 10))
	require.NoError(t, err)
	require.NoError(t, a.Close())
}
