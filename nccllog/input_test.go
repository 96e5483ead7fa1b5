package nccllog

import (
	"bytes"
	"compress/gzip"
	"io"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/ulikunitz/xz"
)

func gzipBytes(t testing.TB, b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	_, err := w.Write(b)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	return buf.Bytes()
}

func zstdBytes(t testing.TB, b []byte) []byte {
	var buf bytes.Buffer
	w, err := zstd.NewWriter(&buf)
	require.NoError(t, err)
	_, err = w.Write(b)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	return buf.Bytes()
}

func xzBytes(t testing.TB, b []byte) []byte {
	var buf bytes.Buffer
	w, err := xz.NewWriter(&buf)
	require.NoError(t, err)
	_, err = w.Write(b)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	return buf.Bytes()
}

// zstdWindow is one zstd frame (RFC 8878) declaring a window of
// 1<<windowLog bytes, holding data in one raw block.
func zstdWindow(windowLog uint, data []byte) []byte {
	b := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, byte((windowLog - 10) << 3)}
	h := uint32(len(data))<<3 | 1 // last block, raw
	b = append(b, byte(h), byte(h>>8), byte(h>>16))
	return append(b, data...)
}

// TestOpen: the magic bytes choose the decoder, whatever the name; what
// is read is the plain content.
func TestOpen(t *testing.T) {
	plain := []byte("NCCL WARN Call to ibv_reg_mr failed\nline two\n")
	for name, data := range map[string][]byte{
		"plain": plain, "gzip": gzipBytes(t, plain), "zstd": zstdBytes(t, plain), "xz": xzBytes(t, plain),
		"zstd 8 MiB window": zstdWindow(23, plain),
		"short":             []byte("x"), "empty": nil,
	} {
		t.Run(name, func(t *testing.T) {
			in, err := Open("-", bytes.NewReader(data))
			require.NoError(t, err)
			got, err := io.ReadAll(in)
			require.NoError(t, err)
			require.NoError(t, in.Close())
			switch name {
			case "short", "empty":
				require.Equal(t, string(data), string(got))
				assert.False(t, in.Compressed)
			default:
				require.Equal(t, string(plain), string(got))
				assert.Equal(t, name != "plain", in.Compressed)
			}
		})
	}
}

// TestOpenCaps: a zstd window over DecoderCap is a *CapError naming its
// size, also in a later frame (then without the size).
func TestOpenCaps(t *testing.T) {
	plain := []byte("NCCL WARN x\n")
	for _, c := range []struct {
		name string
		data []byte
		msg  string
	}{
		{"first frame", zstdWindow(24, plain), "zstd window of 16 MiB exceeds explain's 8 MiB decompression limit"},
		{"later frame", append(zstdWindow(20, plain), zstdWindow(29, plain)...), "zstd window exceeds explain's 8 MiB decompression limit"},
	} {
		t.Run(c.name, func(t *testing.T) {
			in, err := Open("-", bytes.NewReader(c.data))
			require.NoError(t, err)
			defer in.Close()
			_, err = io.ReadAll(in)
			var ce *CapError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, c.msg, ce.Error())
			var re *ReadError
			assert.ErrorAs(t, err, &re)
		})
	}
}

// FuzzDecoders: whatever the bytes, opening and reading an input never
// panics, and the xz guard passes what it passes unchanged.
func FuzzDecoders(f *testing.F) {
	log := []byte("h:1:2 [0] misc/ibvwrap.cc:190 NCCL WARN Call to ibv_create_cq failed with error Cannot allocate memory\n")
	f.Add(xzBytes(f, log))
	f.Add(zstdBytes(f, log))
	f.Add(zstdWindow(29, log))
	f.Add(gzipBytes(f, log))
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := io.ReadAll(newXZGuard(bytes.NewReader(data), DecoderCap))
		if err == nil && !bytes.Equal(out, data) {
			t.Fatalf("guard changed the data")
		}
		if in, err := Open("-", bytes.NewReader(data)); err == nil {
			_, _ = io.Copy(io.Discard, in)
			_ = in.Close()
		}
	})
}
