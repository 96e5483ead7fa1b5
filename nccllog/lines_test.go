package nccllog

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSplit: whole lines in chunks, in order, whatever the reads; a last
// line without a newline gets one; a line over splitSize comes in pieces;
// the reader's error comes back after what was read before it.
func TestSplit(t *testing.T) {
	long := strings.Repeat("x", splitSize+10)
	for _, c := range []struct {
		name, in string
		want     []string
	}{
		{"empty", "", nil},
		{"lines", "a\nb\n", []string{"a", "b"}},
		{"no final newline", "a\nb", []string{"a", "b"}},
		{"long line", long + "\nz\n", []string{long[:splitSize], long[splitSize:], "z"}},
	} {
		for rname, wrap := range map[string]func(io.Reader) io.Reader{
			"whole reads": func(r io.Reader) io.Reader { return r },
			"one byte":    iotest.OneByteReader,
		} {
			t.Run(c.name+"/"+rname, func(t *testing.T) {
				var got []string
				err := Split(wrap(strings.NewReader(c.in)), func(chunk []byte) {
					require.Equal(t, byte('\n'), chunk[len(chunk)-1], "a chunk ends a line")
					got = append(got, strings.Split(string(chunk[:len(chunk)-1]), "\n")...)
				})
				require.NoError(t, err)
				assert.Equal(t, c.want, got)
			})
		}
	}
	boom := errors.New("boom")
	var got []string
	err := Split(errReaderAfter("a\nb", boom), func(chunk []byte) { got = append(got[:0], string(chunk)) })
	assert.ErrorIs(t, err, boom)
	assert.Equal(t, []string{"b\n"}, got, "the partial line read before the error is handed on")
}

// errReaderAfter returns s, then err.
func errReaderAfter(s string, err error) io.Reader {
	return &errAfter{r: strings.NewReader(s), err: err}
}

type errAfter struct {
	r   *strings.Reader
	err error
}

func (e *errAfter) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil {
		return n, e.err
	}
	return n, nil
}
