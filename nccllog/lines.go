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

// MaxLine is the longest line this package hands on, the bound the
// matcher and the relay's tap keep (diagnosis.MaxLine, launcher.MaxLine):
// a longer line is cut there and the rest of it dropped, so that its rest
// is never read as lines of its own.
const MaxLine = 64 << 10

// splitSize is the most Split reads at once.
const splitSize = 256 << 10

// Split reads r to its end and hands its lines to lines, as many whole
// lines at a time as one read holds, each cut at MaxLine; a last line
// without a newline gets one. It returns r's error other than io.EOF.
func Split(r io.Reader, lines Lines) error {
	buf := make([]byte, splitSize+1) // one byte more: room for a cut line's newline
	n, skip := 0, false
	for {
		k, err := r.Read(buf[n:splitSize])
		if skip && k > 0 {
			// The rest of a line cut at MaxLine: dropped up to its newline.
			if i := bytes.IndexByte(buf[n:n+k], '\n'); i < 0 {
				k = 0
			} else {
				k = copy(buf[n:], buf[n+i+1:n+k])
				skip = false
			}
		}
		n += k
		// buf[:n-k] holds no newline: only the new bytes are searched.
		if i := bytes.LastIndexByte(buf[n-k:n], '\n'); i >= 0 {
			end := n - k + i + 1
			lines(CutLong(buf[:end]))
			n = copy(buf, buf[end:n])
		}
		if n >= MaxLine {
			buf[MaxLine] = '\n'
			lines(buf[:MaxLine+1])
			n, skip = 0, true
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

// CutLong cuts each line of p (whole lines, each ending in '\n') at
// MaxLine, dropping the rest of the line, in place, and returns the
// shortened p; p itself when no line is longer.
func CutLong(p []byte) []byte {
	w := 0
	for r := 0; r < len(p); {
		i := bytes.IndexByte(p[r:], '\n')
		if i < 0 {
			i = len(p) - r - 1 // not whole lines: the last byte stands for the newline
		}
		keep := min(i, MaxLine)
		if w != r {
			copy(p[w:], p[r:r+keep])
		}
		w += keep
		p[w] = '\n'
		w++
		r += i + 1
	}
	return p[:w]
}
