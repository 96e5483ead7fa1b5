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

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
	"github.com/urfave/cli/v2"

	"github.com/ncclrun/ncclrun/diagnosis"
)

func cmdExplain(c *cli.Context, e *env) error {
	names := c.Args().Slice()
	if len(names) == 0 {
		names = []string{"-"}
	}
	var (
		readers []io.Reader
		closers []io.Closer
	)
	defer func() {
		for _, cl := range closers {
			_ = cl.Close()
		}
	}()
	stdinUsed := false
	for _, name := range names {
		var src io.Reader
		if name == "-" {
			if stdinUsed {
				return usagef("explain: - (stdin) given twice")
			}
			stdinUsed = true
			src = e.stdin
		} else {
			f, err := os.Open(name)
			if err != nil {
				return &usageError{fmt.Errorf("explain: %w", err)}
			}
			closers = append(closers, f)
			src = f
		}
		r, cl, err := decompress(src)
		if err != nil {
			return &usageError{fmt.Errorf("explain: %s: %w", displayName(name), err)}
		}
		if cl != nil {
			closers = append(closers, cl)
		}
		// Each file ends a line, so the last line of one never joins the
		// first of the next.
		readers = append(readers, &namedReader{name: displayName(name), r: r}, newlineReader{})
	}
	in := io.MultiReader(readers...)
	ds, err := diagnosis.Explain(in, diagnosis.Facts{})
	if err == nil {
		// Whatever Explain left unread must still be readable: a corrupt
		// tail of a compressed file is an unreadable input, not a clean log.
		_, err = io.Copy(io.Discard, in)
	}
	if err != nil {
		var re *readError
		if errors.As(err, &re) {
			return &usageError{fmt.Errorf("explain: %w", re)}
		}
		return fmt.Errorf("explain: %w", err)
	}
	if c.Bool(flagJSON) {
		return writeJSON(e.stdout, struct {
			Diagnoses []diagnosis.Diagnosis `json:"diagnoses"`
		}{nonNil(ds)})
	}
	return writeExplain(e.stdout, ds)
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

// decompress returns r's content, decompressed when it starts with the
// magic bytes of gzip, bzip2, zstd or xz (whatever the file is called).
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
		return zr, zr, nil
	case bytes.HasPrefix(head, magicBzip2):
		return bzip2.NewReader(br), nil, nil
	case bytes.HasPrefix(head, magicZstd):
		zr, err := zstd.NewReader(br)
		if err != nil {
			return nil, nil, fmt.Errorf("zstd: %w", err)
		}
		return zr, closerFunc(zr.Close), nil
	case bytes.HasPrefix(head, magicXz):
		xr, err := xz.NewReader(br)
		if err != nil {
			return nil, nil, fmt.Errorf("xz: %w", err)
		}
		return xr, nil, nil
	}
	return br, nil, nil
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

// namedReader tags read errors with the input's name.
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

// newlineReader yields a single "\n".
type newlineReader struct{}

func (newlineReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	p[0] = '\n'
	return 1, io.EOF
}
