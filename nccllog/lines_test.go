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
// line without a newline gets one; a line over MaxLine is cut there and
// its rest dropped, never read as lines of its own; the reader's error
// comes back after what was read before it.
func TestSplit(t *testing.T) {
	long := strings.Repeat("x", splitSize+10)
	over := strings.Repeat("y", MaxLine) + " WARN rest"
	for _, c := range []struct {
		name, in string
		want     []string
	}{
		{"empty", "", nil},
		{"lines", "a\nb\n", []string{"a", "b"}},
		{"no final newline", "a\nb", []string{"a", "b"}},
		{"long line", long + "\nz\n", []string{long[:MaxLine], "z"}},
		{"line just over MaxLine, between lines", "a\n" + over + "\nb\n", []string{"a", over[:MaxLine], "b"}},
		{"line of MaxLine", "a\n" + over[:MaxLine] + "\nb\n", []string{"a", over[:MaxLine], "b"}},
		{"long last line without newline", "a\n" + long, []string{"a", long[:MaxLine]}},
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

// TestCutLong: lines over MaxLine are cut in place, the others kept.
func TestCutLong(t *testing.T) {
	over := strings.Repeat("x", MaxLine+5)
	for _, c := range []struct{ name, in, want string }{
		{"none long", "a\nbb\n", "a\nbb\n"},
		{"one long", "a\n" + over + "\nb\n", "a\n" + over[:MaxLine] + "\nb\n"},
		{"two long", over + "\n" + over + "\n", over[:MaxLine] + "\n" + over[:MaxLine] + "\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, string(CutLong([]byte(c.in))))
		})
	}
}
