package nccllog

import "io"

// aheadReader reads r on a goroutine of its own, a buffer ahead of its
// reader: a compressed log is decompressed on one core while the matcher
// reads the previous buffer on another, as `zcat F | grep` runs its two
// processes side by side. It holds at
// most aheadBufs buffers of aheadSize bytes. Read is for one goroutine;
// Close stops the reading goroutine (after its current read of r) and
// must be called once the reader is no longer read, before r's decoder is
// closed.
type aheadReader struct {
	full  chan aheadChunk
	free  chan []byte
	done  chan struct{}
	quit  chan struct{} // closed when fill returns
	cur   aheadChunk
	off   int
	ended bool
}

type aheadChunk struct {
	b   []byte
	err error
}

// 64 KiB buffers keep the decoder a step ahead: 256 KiB ones were no
// faster and raised the peak RSS.
const (
	aheadSize = 64 << 10
	aheadBufs = 3
)

func newAheadReader(r io.Reader) *aheadReader {
	a := &aheadReader{full: make(chan aheadChunk, aheadBufs), free: make(chan []byte, aheadBufs),
		done: make(chan struct{}), quit: make(chan struct{})}
	for i := 0; i < aheadBufs; i++ {
		a.free <- make([]byte, aheadSize)
	}
	go a.fill(r)
	return a
}

// fill reads r into free buffers until an error (io.EOF included), which
// it passes on after the data read with it.
func (a *aheadReader) fill(r io.Reader) {
	defer close(a.quit)
	for {
		var b []byte
		select {
		case b = <-a.free:
		case <-a.done:
			return
		}
		// Fill b, keeping r's own error (io.ReadAtLeast would turn a
		// reader's io.ErrUnexpectedEOF into a clean end); a reader that
		// returns nothing many times over is io.ErrNoProgress, as bufio's.
		n, empty := 0, 0
		var err error
		for n < len(b) && err == nil {
			var k int
			k, err = r.Read(b[n:])
			n += k
			if k == 0 && err == nil {
				if empty++; empty >= 100 {
					err = io.ErrNoProgress
				}
			}
		}
		select {
		case a.full <- aheadChunk{b: b[:n], err: err}:
		case <-a.done:
			return
		}
		if err != nil {
			return
		}
	}
}

func (a *aheadReader) Read(p []byte) (int, error) {
	for a.off == len(a.cur.b) {
		if a.ended {
			return 0, a.cur.err
		}
		if a.cur.b != nil {
			a.free <- a.cur.b[:cap(a.cur.b)]
		}
		a.cur, a.off = <-a.full, 0
		if a.cur.err != nil {
			a.ended = true
		}
	}
	n := copy(p, a.cur.b[a.off:])
	a.off += n
	return n, nil
}

// Close stops the reading goroutine and waits until it no longer reads r
// (so that r's decoder can be closed after it); it does not close r.
func (a *aheadReader) Close() error {
	close(a.done)
	<-a.quit
	return nil
}
