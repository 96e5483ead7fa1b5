package nccllog

import (
	"bytes"
	"errors"
	"io"
)

// xzGuard passes an xz file through unchanged while it walks the file's
// container structure (The .xz File Format 1.0.4: stream header, block
// headers, LZMA2 chunk headers, index, stream footer, stream padding)
// without decoding anything, and fails a Read before the decoder gets a
// block header whose LZMA2 dictionary is larger than max. The decoder
// (github.com/ulikunitz/xz) has no cap of its own: it sizes its dictionary
// from each block header and treats ReaderConfig.DictCap as a minimum, so a 240-byte file whose
// headers declare 1.5 GiB dictionaries would otherwise allocate them; the
// xz tool refuses such input the same way with --memlimit. Malformed
// structure is an error here too (the decoder would report it a little
// later), so that no block header slips past the walk.
type xzGuard struct {
	r   io.Reader
	max int64
	err error

	state int
	// want bytes are collected into buf before then runs; skip bytes are
	// passed without a look.
	want int
	buf  []byte
	then func() error
	skip int64

	check    int   // size of each block's check field
	blockLen int64 // bytes of the current block's header and data so far
	idx      xzIndex
}

var errXZStructure = errors.New("xz: malformed container")

const (
	xzStreamHeader = iota
	xzBlockStart
	xzChunk
	xzIndexing
	xzPadding
)

func newXZGuard(r io.Reader, max int64) *xzGuard {
	g := &xzGuard{r: r, max: max}
	g.expectStream(nil)
	return g
}

func (g *xzGuard) Read(p []byte) (int, error) {
	if g.err != nil {
		return 0, g.err
	}
	n, err := g.r.Read(p)
	if werr := g.walk(p[:n]); werr != nil {
		g.err = werr
		return 0, werr
	}
	return n, err
}

// collect arranges for the next n bytes to be gathered and fn to run.
func (g *xzGuard) collect(n int, fn func() error) {
	g.want, g.buf, g.then = n, g.buf[:0], fn
}

// expectStream starts a stream header of which first was already read.
func (g *xzGuard) expectStream(first []byte) {
	g.state = xzStreamHeader
	g.collect(12-len(first), func() error {
		h := g.buf
		if !bytes.HasPrefix(h, magicXz) || h[6] != 0 || h[7] > 0x0f {
			return errXZStructure
		}
		g.check = xzCheckSize(h[7])
		g.state = xzBlockStart
		return nil
	})
	g.buf = append(g.buf, first...)
}

func xzCheckSize(t byte) int {
	switch {
	case t == 0:
		return 0
	case t <= 3:
		return 4
	case t <= 6:
		return 8
	case t <= 9:
		return 16
	case t <= 12:
		return 32
	}
	return 64
}

func (g *xzGuard) walk(b []byte) error {
	for len(b) > 0 {
		if g.skip > 0 {
			k := min(g.skip, int64(len(b)))
			g.skip -= k
			b = b[k:]
			continue
		}
		if g.want > 0 {
			k := min(g.want, len(b))
			g.buf = append(g.buf, b[:k]...)
			g.want -= k
			b = b[k:]
			if g.want == 0 {
				if err := g.then(); err != nil {
					return err
				}
			}
			continue
		}
		c := b[0]
		b = b[1:]
		var err error
		switch g.state {
		case xzBlockStart:
			err = g.blockStart(c)
		case xzChunk:
			err = g.chunk(c)
		case xzIndexing:
			err = g.index(c)
		case xzPadding:
			err = g.padding(c)
		default:
			err = errXZStructure
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (g *xzGuard) blockStart(c byte) error {
	if c == 0 {
		g.state = xzIndexing
		g.idx = xzIndex{len: 1}
		return nil
	}
	size := (int(c) + 1) * 4
	g.collect(size-1, func() error {
		if err := g.blockHeader(g.buf); err != nil {
			return err
		}
		g.blockLen = int64(size)
		g.state = xzChunk
		return nil
	})
	return nil
}

// blockHeader checks a block header (after its size byte): the LZMA2
// filter's dictionary must be within max.
func (g *xzGuard) blockHeader(h []byte) error {
	if len(h) < 5 {
		return errXZStructure
	}
	flags := h[0]
	if flags&0x3c != 0 {
		return errXZStructure
	}
	pos := 1
	next := func() (uint64, bool) {
		if pos >= len(h)-4 {
			return 0, false
		}
		v, n := xzUvarint(h[pos : len(h)-4])
		pos += n
		return v, n > 0
	}
	for _, bit := range []byte{0x40, 0x80} {
		if flags&bit != 0 {
			if _, ok := next(); !ok {
				return errXZStructure
			}
		}
	}
	for f := 0; f < int(flags&3)+1; f++ {
		id, ok1 := next()
		size, ok2 := next()
		if !ok1 || !ok2 || uint64(len(h)-4-pos) < size {
			return errXZStructure
		}
		props := h[pos : pos+int(size)]
		pos += int(size)
		if id == 0x21 {
			if len(props) != 1 || props[0] > 40 {
				return errXZStructure
			}
			if d := lzma2Dict(props[0]); d > g.max {
				return &CapError{Format: "xz", Size: d, Max: g.max}
			}
		}
	}
	return nil
}

// lzma2Dict is the dictionary size an LZMA2 property byte declares.
func lzma2Dict(c byte) int64 {
	if c == 40 {
		return 1<<32 - 1
	}
	return int64(2|c&1) << (c/2 + 11)
}

// xzUvarint decodes the xz multibyte integer at the start of b (at most 9
// bytes); n is 0 when b holds none.
func xzUvarint(b []byte) (v uint64, n int) {
	for i := 0; i < len(b) && i < 9; i++ {
		v |= uint64(b[i]&0x7f) << (7 * i)
		if b[i]&0x80 == 0 {
			return v, i + 1
		}
	}
	return 0, 0
}

// chunk reads an LZMA2 control byte and skips the chunk's data.
func (g *xzGuard) chunk(c byte) error {
	g.blockLen++
	switch {
	case c == 0: // end of the LZMA2 data: block padding, then the check
		pad := (4 - g.blockLen%4) % 4
		g.skip = pad + int64(g.check)
		g.state = xzBlockStart
	case c == 1 || c == 2: // uncompressed chunk
		g.collect(2, func() error {
			n := int64(g.buf[0])<<8 | int64(g.buf[1]) + 1
			g.blockLen += 2 + n
			g.skip = n
			return nil
		})
	case c >= 0x80: // LZMA chunk: unpacked size, packed size, maybe properties
		n := 4
		if (c>>5)&3 >= 2 {
			n = 5
		}
		g.collect(n, func() error {
			packed := int64(g.buf[2])<<8 | int64(g.buf[3]) + 1
			g.blockLen += int64(n) + packed
			g.skip = packed
			return nil
		})
	default:
		return errXZStructure
	}
	return nil
}

// xzIndex walks an index: record count, two integers per record, padding
// to four bytes, CRC32.
type xzIndex struct {
	len     int64
	ints    uint64 // integers still to read once the count is known
	counted bool
	cur     []byte // bytes of the integer being read
}

func (g *xzGuard) index(c byte) error {
	x := &g.idx
	x.len++
	x.cur = append(x.cur, c)
	if len(x.cur) > 9 {
		return errXZStructure
	}
	if c&0x80 != 0 {
		return nil
	}
	v, n := xzUvarint(x.cur)
	x.cur = x.cur[:0]
	if n == 0 {
		return errXZStructure
	}
	if !x.counted {
		if v > 1<<62 {
			return errXZStructure
		}
		x.counted, x.ints = true, 2*v
	} else {
		x.ints--
	}
	if x.ints == 0 {
		// Padding and CRC32 are skipped, then the stream footer is read.
		g.skip = (4-x.len%4)%4 + 4
		g.collect(12, func() error {
			if !bytes.HasSuffix(g.buf, []byte("YZ")) {
				return errXZStructure
			}
			g.state = xzPadding
			return nil
		})
	}
	return nil
}

// padding reads stream padding (zero bytes) or the next stream's header.
func (g *xzGuard) padding(c byte) error {
	if c == 0 {
		return nil
	}
	if c != magicXz[0] {
		return errXZStructure
	}
	g.expectStream([]byte{c})
	return nil
}
