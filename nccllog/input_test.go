package nccllog

import (
	"bytes"
	"compress/gzip"
	"io"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

// xzHead is the start of an xz file (The .xz File Format 1.0.4: magic,
// stream flags with a CRC32 check, their CRC32), what Open recognises.
var xzHead = []byte{0xfd, '7', 'z', 'X', 'Z', 0x00, 0x00, 0x01, 0x69, 0x22, 0xde, 0x36}

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
		"plain": plain, "gzip": gzipBytes(t, plain), "zstd": zstdBytes(t, plain),
		"zstd 2 MiB window": zstdWindow(21, plain),
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
// size (the window, or the content of a single-segment frame), also in a
// later frame (then without the size).
func TestOpenCaps(t *testing.T) {
	plain := []byte("NCCL WARN x\n")
	// A single-segment frame whose content size (3 MiB, in 4 bytes) is its
	// window: its one raw block holds less, which the cap refuses first.
	single := append([]byte{0x28, 0xb5, 0x2f, 0xfd, 0xa0, 0x00, 0x00, 0x30, 0x00}, 0x61, 0x00, 0x00)
	single = append(single, plain...)
	for _, c := range []struct {
		name string
		data []byte
		msg  string
	}{
		{"first frame", zstdWindow(22, plain), "zstd window of 4 MiB exceeds explain's 2 MiB decompression limit"},
		{"first frame 8 MiB", zstdWindow(23, plain), "zstd window of 8 MiB exceeds explain's 2 MiB decompression limit"},
		{"single segment", single, "zstd window of 3 MiB exceeds explain's 2 MiB decompression limit"},
		{"later frame", append(zstdWindow(20, plain), zstdWindow(29, plain)...), "zstd window exceeds explain's 2 MiB decompression limit"},
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

// TestOpenXz: an xz input, whatever its name and length, is refused when
// it is opened, before anything is read from it, as a *ReadError holding
// an *UnsupportedError; six bytes that are not all xz's magic are read as
// plain text.
func TestOpenXz(t *testing.T) {
	for _, c := range []struct {
		name string
		data []byte
		xz   bool
	}{
		{"stream header", xzHead, true},
		{"magic only", xzHead[:6], true},
		{"header and garbage", append(append([]byte{}, xzHead...), bytes.Repeat([]byte{0xff}, 100<<10)...), true},
		{"five bytes of the magic", xzHead[:5], false},
		{"magic with another last byte", append([]byte{0xfd, '7', 'z', 'X', 'Z', 0x01}, "NCCL WARN x\n"...), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			in, err := Open("-", bytes.NewReader(c.data))
			if !c.xz {
				require.NoError(t, err)
				got, err := io.ReadAll(in)
				require.NoError(t, err)
				require.NoError(t, in.Close())
				assert.Equal(t, string(c.data), string(got))
				return
			}
			require.Nil(t, in)
			var re *ReadError
			require.ErrorAs(t, err, &re)
			var ue *UnsupportedError
			require.ErrorAs(t, err, &ue)
			assert.Equal(t, "xz", ue.Format)
			assert.Equal(t, "xz-compressed input is not read", err.Error())
		})
	}
}

// FuzzDecoders: whatever the bytes, opening and reading an input never
// panics, and a plain input (no decoder) is read unchanged.
func FuzzDecoders(f *testing.F) {
	log := []byte("h:1:2 [0] misc/ibvwrap.cc:190 NCCL WARN Call to ibv_create_cq failed with error Cannot allocate memory\n")
	f.Add(append(append([]byte{}, xzHead...), log...))
	f.Add(zstdBytes(f, log))
	f.Add(zstdWindow(21, log))
	f.Add(zstdWindow(29, log))
	f.Add(gzipBytes(f, log))
	f.Add(log)
	f.Fuzz(func(t *testing.T, data []byte) {
		in, err := Open("-", bytes.NewReader(data))
		if err != nil {
			return
		}
		out, rerr := io.ReadAll(in)
		_ = in.Close()
		if !in.Compressed && (rerr != nil || !bytes.Equal(out, data)) {
			t.Fatalf("plain input changed: err %v", rerr)
		}
	})
}
