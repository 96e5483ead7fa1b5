// Copyright 2023 The Go Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package zstd

// window stores up to size bytes of data.
// It is implemented as a circular buffer:
// sequential save calls append to the data slice until
// its length reaches configured size and after that,
// save calls overwrite previously saved data at off
// and update off such that it always points at
// the byte stored before others.
type window struct {
	size int
	data []byte
	off  int
}

// windowStart is what a window first allocates when its size is larger.
// A frame that declares an 8 MiB window may hold a few bytes, and Go's
// reset allocated (and, for reused memory, cleared) the whole size for
// each; past windowStart bytes the window allocates its whole size at
// once, so it never holds more than size + windowStart.
const windowStart = 256 << 10

// reset clears stored data and configures window size.
func (w *window) reset(size int) {
	w.data = w.data[:0]
	w.off = 0
	w.size = size
}

// reserve makes room for n more bytes: len(w.data)+n is at most w.size.
func (w *window) reserve(n int) {
	need := len(w.data) + n
	if need <= cap(w.data) {
		return
	}
	c := w.size
	if need <= windowStart {
		c = min(c, windowStart)
	}
	b := make([]byte, len(w.data), c)
	copy(b, w.data)
	w.data = b
}

// len returns the number of stored bytes.
func (w *window) len() uint32 {
	return uint32(len(w.data))
}

// save stores up to size last bytes from the buf.
func (w *window) save(buf []byte) {
	if w.size == 0 {
		return
	}
	if len(buf) == 0 {
		return
	}

	if len(buf) >= w.size {
		from := len(buf) - w.size
		w.data = w.data[:0]
		w.reserve(w.size)
		w.data = append(w.data, buf[from:]...)
		w.off = 0
		return
	}

	// Update off to point to the oldest remaining byte.
	free := w.size - len(w.data)
	if free == 0 {
		n := copy(w.data[w.off:], buf)
		if n == len(buf) {
			w.off += n
		} else {
			w.off = copy(w.data, buf[n:])
		}
	} else {
		if free >= len(buf) {
			w.reserve(len(buf))
			w.data = append(w.data, buf...)
		} else {
			w.reserve(free)
			w.data = append(w.data, buf[:free]...)
			w.off = copy(w.data, buf[free:])
		}
	}
}

// appendTo appends stored bytes between from and to indices to the buf.
// Index from must be less or equal to index to and to must be less or equal to w.len().
func (w *window) appendTo(buf []byte, from, to uint32) []byte {
	dataLen := uint32(len(w.data))
	from += uint32(w.off)
	to += uint32(w.off)

	wrap := false
	if from > dataLen {
		from -= dataLen
		wrap = !wrap
	}
	if to > dataLen {
		to -= dataLen
		wrap = !wrap
	}

	if wrap {
		buf = append(buf, w.data[from:]...)
		return append(buf, w.data[:to]...)
	} else {
		return append(buf, w.data[from:to]...)
	}
}
