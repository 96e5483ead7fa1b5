package nccllog

import (
	"bufio"
	"bytes"
	"compress/bzip2"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/klauspost/compress/zstd"
)

// DecoderCap bounds the zstd window a compressed input may declare: the
// decoder keeps that much history (and up to 1 MiB more) for the whole
// input, and explain's peak RSS is to stay within 16 MiB whatever it
// reads. 2 MiB is what the zstd tool uses at its default level (3) and up
// to -8 on inputs of any size; -9 and above, and --long, use more. gzip's
// window is 32 KiB and bzip2's blocks 900 kB, both below it. A larger
// window is a *CapError, never allocated.
const DecoderCap = 2 << 20

// CapError is a zstd input with a frame whose header declares a window
// over Max. Size is what it declares, 0 when the decoder did not say (a
// frame after the first).
type CapError struct {
	Format string // "zstd"
	Size   int64
	Max    int64
}

func (e *CapError) Error() string {
	if e.Size == 0 {
		return fmt.Sprintf("%s window exceeds explain's %s decompression limit", e.Format, sizeText(e.Max))
	}
	return fmt.Sprintf("%s window of %s exceeds explain's %s decompression limit", e.Format, sizeText(e.Size), sizeText(e.Max))
}

// UnsupportedError is an input compressed in a format this package does
// not decompress, recognised by its magic bytes: xz, whose Go decoder
// (github.com/ulikunitz/xz) allocates whatever dictionary a block header
// declares.
type UnsupportedError struct {
	Format string // "xz"
}

func (e *UnsupportedError) Error() string {
	return e.Format + "-compressed input is not read"
}

// ReadError is a failure to read an input (a truncated or corrupt
// compressed file), as opposed to a failure of whoever reads it.
type ReadError struct{ Err error }

func (e *ReadError) Error() string { return e.Err.Error() }
func (e *ReadError) Unwrap() error { return e.Err }

// Input is one of explain's inputs: a file or standard input, its content
// decompressed when it starts with the magic bytes of gzip, bzip2 or zstd
// (a frame or a skippable frame), whatever it is called. An xz input is
// refused by Open (a *ReadError holding an *UnsupportedError). Its read
// errors are *ReadError (a *CapError inside for a zstd window over
// DecoderCap).
type Input struct {
	// Compressed is set when a decoder reads the input: it then holds its
	// history (at most DecoderCap and 1 MiB) for the whole input.
	Compressed bool

	r     io.Reader
	close []func()
}

// Open opens an input: the file name, or stdin for "-". Close it after
// reading, before the next one is opened: memory is then one decoder's
// at a time.
func Open(name string, stdin io.Reader) (*Input, error) {
	in := &Input{}
	src := stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		in.close = append(in.close, func() { f.Close() })
		src = f
	}
	if err := in.decompress(src); err != nil {
		in.Close()
		return nil, err
	}
	if in.Compressed {
		// Decompress on another core while the caller reads.
		a := newAheadReader(in.r)
		in.close = append(in.close, func() { a.Close() })
		in.r = a
	}
	return in, nil
}

func (in *Input) Read(p []byte) (int, error) {
	n, err := in.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		var re *ReadError
		if !errors.As(err, &re) {
			err = &ReadError{Err: err}
		}
	}
	return n, err
}

// Close closes the decoder and the file, last opened first.
func (in *Input) Close() error {
	for i := len(in.close) - 1; i >= 0; i-- {
		in.close[i]()
	}
	in.close = nil
	return nil
}

// Magic numbers of the compressed formats (RFC 1952, bzip2, RFC 8878, and
// xz file format 1.0.4, which is refused).
var (
	magicGzip  = []byte{0x1f, 0x8b}
	magicBzip2 = []byte("BZh")
	magicZstd  = []byte{0x28, 0xb5, 0x2f, 0xfd}
	magicXz    = []byte{0xfd, '7', 'z', 'X', 'Z', 0x00}
)

// zstdSkippable reports whether b starts with the magic number of a zstd
// skippable frame (RFC 8878 3.1.2: 0x184D2A50 to 0x184D2A5F, little
// endian), which pzstd writes before each frame and the seekable format
// after the last.
func zstdSkippable(b []byte) bool {
	return len(b) >= 4 && b[0]&0xf0 == 0x50 && b[1] == 0x2a && b[2] == 0x4d && b[3] == 0x18
}

// decompress sets in.r to r's content, through a decoder when r starts
// with a compressed format's magic bytes.
func (in *Input) decompress(r io.Reader) error {
	br := bufio.NewReaderSize(r, 64<<10)
	head, err := br.Peek(32)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
		return &ReadError{Err: fmt.Errorf("read: %w", err)}
	}
	in.r = br
	switch {
	case bytes.HasPrefix(head, magicGzip):
		zr, err := gzip.NewReader(br)
		if err != nil {
			return &ReadError{Err: fmt.Errorf("gzip: %w", err)}
		}
		in.r, in.Compressed = zr, true
		in.close = append(in.close, func() { zr.Close() })
	case bytes.HasPrefix(head, magicBzip2):
		in.r, in.Compressed = bzip2.NewReader(br), true
	case bytes.HasPrefix(head, magicZstd), zstdSkippable(head):
		// The decoder refuses a frame whose window is over the cap
		// before it allocates it; one goroutine, no buffers kept ahead.
		zr, err := zstd.NewReader(br,
			zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxWindow(DecoderCap), zstd.WithDecoderMaxMemory(DecoderCap))
		if err != nil {
			return &ReadError{Err: fmt.Errorf("zstd: %w", err)}
		}
		var first zstd.Header
		_ = first.Decode(head) // the first frame's window names the size refused
		in.r, in.Compressed = &zstdReader{r: zr, first: first}, true
		in.close = append(in.close, zr.Close)
	case bytes.HasPrefix(head, magicXz):
		return &ReadError{Err: &UnsupportedError{Format: "xz"}}
	}
	return nil
}

// zstdReader names the cap in the decoder's "window size exceeded", and
// the format in its other errors save a truncated input's, which is
// "unexpected EOF" as for the other formats.
type zstdReader struct {
	r     *zstd.Decoder
	first zstd.Header
}

func (z *zstdReader) Read(p []byte) (int, error) {
	n, err := z.r.Read(p)
	switch {
	case errors.Is(err, zstd.ErrWindowSizeExceeded), errors.Is(err, zstd.ErrDecoderSizeExceeded):
		ce := &CapError{Format: "zstd", Max: DecoderCap}
		w := z.first.WindowSize
		if z.first.SingleSegment {
			w = z.first.FrameContentSize // the window is the content
		}
		if w > DecoderCap && w <= 1<<62 {
			ce.Size = int64(w)
		}
		err = &ReadError{Err: ce}
	case err != nil && err != io.EOF && !errors.Is(err, io.ErrUnexpectedEOF):
		err = fmt.Errorf("zstd: %w", err)
	}
	return n, err
}

// sizeText renders bytes as "8 MiB" or "1.5 GiB".
func sizeText(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	f, i := float64(n), 0
	for f >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	s := strconv.FormatFloat(f, 'f', 1, 64)
	return strings.TrimSuffix(s, ".0") + " " + units[i]
}
