package nccllog

import (
	"bytes"
	"compress/gzip"
	"io"
	"testing"

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
		"plain": plain, "gzip": gzipBytes(t, plain),
		"short": []byte("x"), "empty": nil,
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

// TestOpenRefused: a bzip2, zstd or xz input, whatever its name and length, is
// refused when it is opened, before anything is read from it, as a
// *ReadError holding an *UnsupportedError; bytes that are not all of a
// magic number are read as plain text.
func TestOpenRefused(t *testing.T) {
	plain := []byte("NCCL WARN x\n")
	// A skippable frame (RFC 8878 3.1.2), as pzstd writes first.
	skippable := []byte{0x5e, 0x2a, 0x4d, 0x18, 0x04, 0x00, 0x00, 0x00, 'n', 'e', 'x', 't'}
	for _, c := range []struct {
		name   string
		data   []byte
		format string // "": read as plain text
	}{
		{"xz stream header", xzHead, "xz"},
		{"xz magic only", xzHead[:6], "xz"},
		{"xz header and garbage", append(append([]byte{}, xzHead...), bytes.Repeat([]byte{0xff}, 100<<10)...), "xz"},
		{"five bytes of the xz magic", xzHead[:5], ""},
		{"xz magic with another last byte", append([]byte{0xfd, '7', 'z', 'X', 'Z', 0x01}, plain...), ""},
		{"zstd frame", zstdWindow(21, plain), "zstd"},
		{"zstd frame declaring 512 MiB", zstdWindow(29, plain), "zstd"},
		{"zstd skippable frame first", append(skippable, zstdWindow(21, plain)...), "zstd"},
		{"three bytes of the zstd magic", append([]byte{0x28, 0xb5, 0x2f}, plain...), ""},
		{"bzip2 block", append([]byte("BZh91AY&SY"), 0x77, 0x4b, 0xb0, 0x14), "bzip2"},
		{"bzip2 empty stream", []byte("BZh9\x17\x72\x45\x38\x50\x90\x00\x00\x00\x00"), "bzip2"},
		{"text starting BZh", []byte("BZh1 is not a bzip2 stream\n"), ""},
		{"bzip2 magic without a block", []byte("BZh9"), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			in, err := Open("-", bytes.NewReader(c.data))
			if c.format == "" {
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
			assert.Equal(t, c.format, ue.Format)
			assert.Equal(t, c.format+"-compressed input is not read", err.Error())
		})
	}
}

// FuzzDecoders: whatever the bytes, opening and reading an input never
// panics, and a plain input (no decoder) is read unchanged.
func FuzzDecoders(f *testing.F) {
	log := []byte("h:1:2 [0] misc/ibvwrap.cc:190 NCCL WARN Call to ibv_create_cq failed with error Cannot allocate memory\n")
	f.Add(append(append([]byte{}, xzHead...), log...))
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
		if !in.Compressed && (rerr != nil || !bytes.Equal(out, withoutHoles(data))) {
			t.Fatalf("plain input changed other than its line-leading NUL bytes: err %v", rerr)
		}
	})
}

// withoutHoles is data less the NUL bytes at the start of its lines, what
// Input hands on of plain input (dropHoles), computed a byte at a time.
func withoutHoles(data []byte) []byte {
	out := []byte{}
	lineStart := true
	for _, c := range data {
		if c == 0 && lineStart {
			continue
		}
		out = append(out, c)
		lineStart = c == '\n'
	}
	return out
}
