package main

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

	"github.com/ulikunitz/xz"
	"github.com/urfave/cli/v2"

	"github.com/ncclrun/ncclrun/diagnosis"
	"github.com/ncclrun/ncclrun/internal/zstd"
)

func cmdExplain(c *cli.Context, e *env) error {
	names := c.Args().Slice()
	if len(names) == 0 {
		names = []string{"-"}
	}
	stdinUsed := false
	for _, name := range names {
		if name == "-" {
			if stdinUsed {
				return usagef("explain: - (stdin) given twice")
			}
			stdinUsed = true
		}
	}
	// One matcher over every input, which are opened one at a time and
	// closed (file and decoder) before the next: memory is the matcher's
	// bounded state plus one decoder within decoderCap.
	m := diagnosis.NewMatcher(diagnosis.Facts{})
	for _, name := range names {
		if err := explainInput(m, name, e.stdin); err != nil {
			return err
		}
	}
	ds, first := m.Diagnoses(), m.FirstFailure()
	if c.Bool(flagJSON) {
		return writeJSON(e.stdout, struct {
			FirstFailure *diagnosis.Failure    `json:"first_failure,omitempty"`
			Diagnoses    []diagnosis.Diagnosis `json:"diagnoses"`
		}{first, nonNil(ds)})
	}
	return writeExplain(e.stdout, ds, first)
}

// explainInput feeds one input (a file, or stdin for "-") to m, to its
// end: each input ends a line, so the last line of one never joins the
// first of the next. An input that cannot be opened, read or decompressed,
// or that needs more than decoderCap to decompress, is a usage error
// naming it.
func explainInput(m *diagnosis.Matcher, name string, stdin io.Reader) error {
	src := stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return &usageError{fmt.Errorf("explain: %w", err)}
		}
		defer f.Close()
		src = f
	}
	r, cl, err := decompress(src)
	if err != nil {
		return inputError(name, err)
	}
	if cl != nil {
		allowDecoder()
		defer cl.Close()
		// Decompress on another core while the matcher reads.
		a := newAheadReader(r)
		defer a.Close()
		r = a
	}
	if err := diagnosis.FeedReader(m, r); err != nil {
		return inputError(name, err)
	}
	return nil
}

// inputError is the one-line usage error for an input that could not be
// read: what went wrong, or by how much it exceeds the decompression cap.
func inputError(name string, err error) error {
	var (
		xe *xzCapError
		ze *zstdCapError
	)
	switch {
	case errors.As(err, &xe):
		err = fmt.Errorf("%w (decompress it first: xz -dc FILE | ncclrun explain -)", xe)
	case errors.As(err, &ze):
		err = fmt.Errorf("%w (decompress it first: zstd -dc FILE | ncclrun explain -)", ze)
	default:
		var re *readError
		if errors.As(err, &re) {
			err = re.err
		}
	}
	return &usageError{fmt.Errorf("explain: %s: %w", displayName(name), err)}
}

func displayName(name string) string {
	if name == "-" {
		return "stdin"
	}
	return name
}

// Magic numbers of the compressed formats explain reads (RFC 1952, bzip2,
// RFC 8878, xz file format 1.0.4).
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

// decoderCap bounds what decompressing one input may take: the xz
// dictionary and the zstd window its headers declare (gzip's window is
// 32 KiB, bzip2's blocks 900 kB). 8 MiB covers `xz` up to -6 (its
// default) and `zstd` up to -19; the xz tool's --memlimit and zstd's
// --memory refuse bigger ones the same way. A larger one is refused with
// one line naming the input (exit 2), never allocated: `ncclrun explain`
// stays within its 16 MiB whatever the input.
const decoderCap = 8 << 20

// decompress returns r's content, decompressed when it starts with the
// magic bytes of gzip, bzip2, zstd (a frame or a skippable frame) or xz
// (whatever the file is called),
// and a closer for the decoder (nil when r is not compressed).
func decompress(r io.Reader) (io.Reader, io.Closer, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	head, err := br.Peek(6)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, nil, fmt.Errorf("read: %w", err)
	}
	switch {
	case bytes.HasPrefix(head, magicGzip):
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, nil, fmt.Errorf("gzip: %w", err)
		}
		return &namedReader{r: zr}, zr, nil
	case bytes.HasPrefix(head, magicBzip2):
		return &namedReader{r: bzip2.NewReader(br)}, closerFunc(func() {}), nil
	case bytes.HasPrefix(head, magicZstd), zstdSkippable(head):
		// The decoder keeps at most zstd.MaxWindowSize (decoderCap) of
		// history; the guard refuses, naming it, a frame that declares
		// more, before the decoder reads it.
		g := newZstdGuard(br, decoderCap)
		return &namedReader{r: zstdReader{r: zstd.NewReader(g), in: g}}, closerFunc(func() {}), nil
	case bytes.HasPrefix(head, magicXz):
		xr, err := xz.NewReader(newXZGuard(br, decoderCap))
		if err != nil {
			return nil, nil, fmt.Errorf("xz: %w", err)
		}
		return &namedReader{r: xr}, closerFunc(func() {}), nil
	}
	return &namedReader{r: br}, nil, nil
}

// zstdReader reads the zstd decoder, which wraps every error with the
// offset where it occurred ("zstd decompression error at N: ..."). An error
// of its input (the guard's, the file's) is passed on as it is, and a
// truncated input is io.ErrUnexpectedEOF itself ("unexpected EOF", as for
// the other formats); the decoder's own errors (corrupt input) keep their
// offset.
type zstdReader struct {
	r  *zstd.Reader
	in *zstdGuard
}

func (z zstdReader) Read(p []byte) (int, error) {
	n, err := z.r.Read(p)
	switch {
	case err == nil || err == io.EOF:
	case z.in.failed != nil:
		err = z.in.failed
	case errors.Is(err, io.ErrUnexpectedEOF):
		err = io.ErrUnexpectedEOF
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

type closerFunc func()

func (f closerFunc) Close() error { f(); return nil }

// readError marks a failure to read an input (a truncated or corrupt
// compressed file): a usage error, not a diagnosis failure.
type readError struct {
	name string
	err  error
}

func (e *readError) Error() string { return fmt.Sprintf("%s: %v", e.name, e.err) }
func (e *readError) Unwrap() error { return e.err }

// namedReader marks read errors as the input's (readError), not the
// matcher's.
type namedReader struct {
	name string
	r    io.Reader
}

func (n *namedReader) Read(p []byte) (int, error) {
	k, err := n.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		err = &readError{name: n.name, err: err}
	}
	return k, err
}
