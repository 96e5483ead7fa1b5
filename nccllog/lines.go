package nccllog

import (
	"bytes"
	"errors"
	"io"
)

// Lines takes NCCL's lines from a source: chunk holds whole lines, each
// ending in '\n', and is the receiver's only while the call lasts. Every
// source of this package hands its lines this way, the shape in which
// CMD's relayed output reaches the matcher, so that one seam takes them
// all.
type Lines func(chunk []byte)

// splitSize is the most Split hands at once; a line longer than that
// reaches lines in pieces of that size, each given a newline.
const splitSize = 256 << 10

// Split reads r to its end and hands its lines to lines, as many whole
// lines at a time as fit in splitSize; a last line without a newline gets
// one. It returns r's error other than io.EOF.
func Split(r io.Reader, lines Lines) error {
	buf := make([]byte, splitSize+1) // one byte more: room for a cut piece's newline
	n := 0
	for {
		k, err := r.Read(buf[n:splitSize])
		n += k
		// buf[:n-k] holds no newline: only the new bytes are searched.
		if i := bytes.LastIndexByte(buf[n-k:n], '\n'); i >= 0 {
			end := n - k + i + 1
			lines(buf[:end])
			n = copy(buf, buf[end:n])
		} else if n == splitSize {
			buf[n] = '\n'
			lines(buf[:n+1])
			n = 0
		}
		if err != nil {
			if n > 0 {
				buf[n] = '\n'
				lines(buf[:n+1])
			}
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}
