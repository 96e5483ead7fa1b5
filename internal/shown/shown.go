// Package shown finds what a terminal shows of a long line: the text from
// its last carriage return on. A progress bar redraws itself with '\r'
// and no newline, so the NCCL line printed after it (2>&1 into one log)
// ends a physical line of any length. The matcher looks at a bounded
// part of a line that long, and launcher and diagnosis both take that
// part from here: its end, where the NCCL line is, not the redraws at
// its start.
package shown

import "bytes"

// Start is where what a terminal shows of line (without its newline)
// starts: at its last '\r' that some text follows (one followed only by
// more of them, as in a CRLF ending, redraws nothing), 0 without one.
// The '\r' is part of what is shown, so that a prefix parser reads the
// line as it reads a short one with redraws.
func Start(line []byte) int {
	end := len(line)
	for end > 0 && line[end-1] == '\r' {
		end--
	}
	return max(bytes.LastIndexByte(line[:end], '\r'), 0)
}

// Line is Start's part of a line read a piece at a time, at most Max
// bytes: the first Max bytes of its last run of text between '\r's, with
// the '\r' before it. Buf may share storage with a piece being added, as
// long as that piece lies at or after Buf's end: Line writes Buf no
// further than it has read.
type Line struct {
	Buf []byte
	Max int
	cr  bool // a '\r' came after Buf's text: the next text replaces it
}

// Reset starts a new line in buf's storage.
func (l *Line) Reset(buf []byte) { l.Buf, l.cr = buf[:0], false }

// Add takes the next piece of the line, without its newline.
func (l *Line) Add(p []byte) {
	for {
		i := bytes.IndexByte(p, '\r')
		if i < 0 {
			l.text(p)
			return
		}
		l.text(p[:i])
		l.cr, p = true, p[i+1:]
	}
}

// text takes a run of the line without '\r'.
func (l *Line) text(p []byte) {
	if len(p) == 0 {
		return // "\r\r" or a line's CRLF ending: nothing redrawn
	}
	if l.cr {
		l.Buf, l.cr = append(l.Buf[:0], '\r'), false
	}
	l.Buf = append(l.Buf, p[:min(len(p), l.Max-len(l.Buf))]...)
}
