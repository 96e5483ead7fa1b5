package nccllog

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
)

// UnsupportedError is an input compressed in a format this package does
// not decompress, recognised by its magic bytes: bzip2, zstd and xz,
// whose decoders hold megabytes for the whole input (a bzip2 block's
// 3.6 MB of tables, a zstd window up to 128 MiB with --long, an xz
// dictionary of any size) against explain's 16 MiB of peak RSS whatever
// it reads. Their tools decompress into explain's standard input instead.
type UnsupportedError struct {
	Format string // "bzip2", "zstd" or "xz"
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
// decompressed when it starts with the magic bytes of gzip, whatever it
// is called: the standard library's decoder, whose history is the
// format's 32 KiB window. A bzip2, zstd or xz input (a zstd frame or
// skippable frame) is refused by Open (a *ReadError holding an
// *UnsupportedError). Its read errors are *ReadError.
type Input struct {
	// Compressed is set when a decoder reads the input.
	Compressed bool

	r     io.Reader
	close []func()
	// midLine is set when the last byte handed on was not a newline: NUL
	// bytes are dropped only at a line's start (dropHoles).
	midLine bool
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
	for n > 0 {
		if n = in.dropHoles(p[:n]); n > 0 || err != nil {
			break
		}
		n, err = in.r.Read(p) // all of it was a hole: read on, never (0, nil)
	}
	if err != nil && !errors.Is(err, io.EOF) {
		var re *ReadError
		if !errors.As(err, &re) {
			err = &ReadError{Err: err}
		}
	}
	return n, err
}

// dropHoles removes, in place, the NUL bytes at the start of each line of
// p and returns the length left. Such a run is the hole a copytruncate
// rotation leaves before the writer's next line (or a file system's
// zero-filled blocks after a crash): no line of text starts with NUL, and
// kept, a hole longer than MaxLine would have the line after it cut away.
// A NUL inside a line is kept.
func (in *Input) dropHoles(p []byte) int {
	if bytes.IndexByte(p, 0) < 0 {
		in.midLine = p[len(p)-1] != '\n'
		return len(p)
	}
	w := 0
	for _, c := range p {
		if c == 0 && !in.midLine {
			continue
		}
		p[w] = c
		w++
		in.midLine = c != '\n'
	}
	return w
}

// Close closes the decoder and the file, last opened first.
func (in *Input) Close() error {
	for i := len(in.close) - 1; i >= 0; i-- {
		in.close[i]()
	}
	in.close = nil
	return nil
}

// Magic numbers of the compressed formats (RFC 1952; bzip2, RFC 8878 and
// xz file format 1.0.4, which are refused).
var (
	magicGzip = []byte{0x1f, 0x8b}
	magicZstd = []byte{0x28, 0xb5, 0x2f, 0xfd}
	magicXz   = []byte{0xfd, '7', 'z', 'X', 'Z', 0x00}
)

// bzip2Stream reports whether b starts a bzip2 stream: "BZh", the block
// size digit, then the magic of a block (the BCD digits of pi) or of the
// end of an empty stream (those of sqrt(pi)), so that a text starting
// "BZh" is read as text.
func bzip2Stream(b []byte) bool {
	if len(b) < 10 || string(b[:3]) != "BZh" || b[3] < '1' || b[3] > '9' {
		return false
	}
	m := string(b[4:10])
	return m == "\x31\x41\x59\x26\x53\x59" || m == "\x17\x72\x45\x38\x50\x90"
}

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
		zr.Multistream(false)
		in.r, in.Compressed = &gzipMembers{zr: zr, br: br}, true
		in.close = append(in.close, func() { zr.Close() })
	case bzip2Stream(head):
		return &ReadError{Err: &UnsupportedError{Format: "bzip2"}}
	case bytes.HasPrefix(head, magicZstd), zstdSkippable(head):
		return &ReadError{Err: &UnsupportedError{Format: "zstd"}}
	case bytes.HasPrefix(head, magicXz):
		return &ReadError{Err: &UnsupportedError{Format: "xz"}}
	}
	return nil
}

// gzipMembers reads the members of a gzip input one after another, as gzip
// -d does: zero bytes from a member's end to the input's end (the padding
// of a tape or of dd's blocks) end the input, as gzip ignores them; any
// other bytes must start the next member.
type gzipMembers struct {
	zr *gzip.Reader
	br *bufio.Reader
}

func (g *gzipMembers) Read(p []byte) (int, error) {
	for {
		n, err := g.zr.Read(p)
		if !errors.Is(err, io.EOF) {
			return n, err
		}
		if n > 0 {
			return n, nil // the member's end is seen again on the next call
		}
		// The member ended: skip zero padding, then expect another member.
		for {
			c, err := g.br.ReadByte()
			if errors.Is(err, io.EOF) {
				return 0, io.EOF
			}
			if err != nil {
				return 0, err
			}
			if c != 0 {
				break
			}
		}
		if err := g.br.UnreadByte(); err != nil {
			return 0, err
		}
		if err := g.zr.Reset(g.br); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return 0, err
		}
		g.zr.Multistream(false)
	}
}
