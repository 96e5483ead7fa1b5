package nccllog

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOpenDropsNULHoles: NUL bytes at the start of a line (the hole a
// copytruncate rotation leaves before the writer's next line, or a file
// system's zero-filled blocks after a crash) are dropped, so that the line
// after a hole longer than MaxLine is not cut away with it; a NUL inside
// a line is kept, plain or compressed, however the reads fall.
func TestOpenDropsNULHoles(t *testing.T) {
	warn := "host1:1:1 [0] NCCL WARN Call to ibv_reg_mr failed\n"
	hole := strings.Repeat("\x00", 3*MaxLine)
	for _, tc := range []struct{ name, in, want string }{
		{"hole at the start", hole + warn, warn},
		{"hole after a line", "a\n" + hole + warn, "a\n" + warn},
		{"hole at the end", warn + hole, warn},
		{"only a hole", hole, ""},
		{"NUL inside a line", "NCCL WARN a\x00b\n\x00c\x00\n", "NCCL WARN a\x00b\nc\x00\n"},
		{"no NUL", warn + warn, warn + warn},
	} {
		for _, gz := range []bool{false, true} {
			data := []byte(tc.in)
			if gz {
				data = gzipBytes(t, data)
			}
			for _, wrap := range []func(io.Reader) io.Reader{
				func(r io.Reader) io.Reader { return r }, iotest.OneByteReader, iotest.HalfReader,
			} {
				in, err := Open("-", wrap(bytes.NewReader(data)))
				require.NoError(t, err)
				got, err := io.ReadAll(in)
				require.NoError(t, err)
				require.NoError(t, in.Close())
				assert.Equal(t, tc.want, string(got), "%s (gzip %v)", tc.name, gz)
			}
		}
	}
}
