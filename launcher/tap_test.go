//go:build linux

package launcher

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// writeSize is what a test's child writes into the pipe at a time: a
// default pipe's worth.
const writeSize = 64 << 10

// lineTap is a Tap that hands each line, without its newline, to line;
// noise nil calls no line noise. shed, when set, is told each chunk Shed
// is asked of.
type lineTap struct {
	line  func(s Stream, line []byte)
	noise func(line []byte) bool
	shed  func(p []byte)
}

func (lt lineTap) Lines(s Stream, p []byte, behind bool) (shed int) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if behind && lt.noise != nil && lt.noise(p[:i]) {
			shed++
		} else {
			lt.line(s, p[:i])
		}
		p = p[i+1:]
	}
	return shed
}

func (lt lineTap) Shed(p []byte) (kept []byte, shed int) {
	if lt.shed != nil {
		lt.shed(p)
	}
	w := 0
	for r := 0; r < len(p); {
		end := r + bytes.IndexByte(p[r:], '\n') + 1
		if lt.noise != nil && lt.noise(p[r:end-1]) {
			shed++
		} else {
			w += copy(p[w:], p[r:end])
		}
		r = end
	}
	return p[:w], shed
}

// infoNoise is the tests' noise: NCCL INFO lines.
func infoNoise(line []byte) bool { return bytes.Contains(line, []byte(" NCCL INFO ")) }

// burst returns n lines of NCCL INFO with a WARN line every warnEvery
// lines (numbered, so each can be told apart), and the WARN count.
func burst(n, warnEvery int) ([]byte, int) {
	var b []byte
	warns := 0
	for i := 0; i < n; i++ {
		if i%warnEvery == warnEvery/2 {
			b = fmt.Appendf(b, "gpu-node-01:31010:31107 [2] misc/socket.cc:50 NCCL WARN net.cc:1012 warning %d: Connection reset by peer\n", warns)
			warns++
			continue
		}
		b = fmt.Appendf(b, "gpu-node-01:31010:31107 [2] NCCL INFO Channel %02d/0 : 10[2] -> 11[3] via P2P/CUMEM/read\n", i%32)
	}
	return b, warns
}

// countWriter counts bytes and closes full once want have arrived.
type countWriter struct {
	mu   sync.Mutex
	n    int
	want int
	full chan struct{}
}

func (c *countWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n += len(p)
	if c.n == c.want {
		close(c.full)
	}
	return len(p), nil
}

// relayBurst relays data through a pipe in chunks of chunk bytes into
// out, with the tap tp, and returns when the relay has returned.
func relayBurst(t *testing.T, data []byte, chunk int, out io.Writer, tp *tap) {
	t.Helper()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	go func() { defer w.Close(); writeChunks(w, data, chunk) }()
	relay(r, out, Stdout, tp, nil)
}

// writeChunks writes data to w chunk bytes at a time, as a child would,
// until it is all written or a write fails.
func writeChunks(w io.Writer, data []byte, chunk int) {
	for p := data; len(p) > 0; {
		k := min(chunk, len(p))
		if _, err := w.Write(p[:k]); err != nil {
			return
		}
		p = p[k:]
	}
}

// TestTapKeepsEveryWarnLineOfABurst: the tap stalls on the first line
// until the relay has written the whole burst (64 MiB of INFO lines with
// a WARN line every 1000), so the queue is full for nearly all of it;
// every WARN line still reaches the tap, in order, and only INFO lines
// are shed. Lines are counted, nothing is timed.
func TestTapKeepsEveryWarnLineOfABurst(t *testing.T) {
	data, warns := burst(600_000, 1000)
	for _, chunk := range []int{writeSize, 4096, 1000} { // reads whole, and cut inside lines
		t.Run(fmt.Sprint(chunk), func(t *testing.T) {
			out := &countWriter{want: len(data), full: make(chan struct{})}
			var once sync.Once
			var got []string
			info := 0
			tp := newTap(lineTap{line: func(_ Stream, line []byte) {
				once.Do(func() { <-out.full })
				if bytes.Contains(line, []byte(" NCCL WARN ")) {
					got = append(got, string(line))
				} else {
					info++
				}
			}, noise: infoNoise})
			tp.drainTime = time.Hour // every line counts here, however slow the machine
			relayBurst(t, data, chunk, out, tp)
			shed, lost := tp.close()
			require.Equal(t, len(data), out.n, "the relay is never cut")
			require.Len(t, got, warns, "every WARN line reached the tap (shed %d, lost %d)", shed, lost)
			for i, l := range got {
				require.True(t, strings.Contains(l, fmt.Sprintf(" warning %d: ", i)), "WARN lines in order: %d is %q", i, l)
			}
			assert.Zero(t, lost)
			assert.Positive(t, shed, "INFO lines were shed under pressure")
			assert.Equal(t, int64(600_000-warns), shed+int64(info), "every INFO line was delivered or shed")
		})
	}
}

// TestTapWarnBurst: while the queue is full, the Tap is asked to shed
// each chunk once, whole; a burst of WARN lines, which holds no noise, is
// kept or counted lost; every line is delivered or counted, none shed.
func TestTapWarnBurst(t *testing.T) {
	data, warns := burst(40_000, 1) // WARN lines only: more than the queue and its reserve hold
	out := &countWriter{want: len(data), full: make(chan struct{})}
	var once sync.Once
	var shedCalls, shedLines atomic.Int64
	got := 0
	tp := newTap(lineTap{line: func(Stream, []byte) {
		once.Do(func() { <-out.full })
		got++
	}, noise: infoNoise, shed: func(p []byte) {
		shedCalls.Add(1)
		shedLines.Add(int64(bytes.Count(p, []byte("\n"))))
	}})
	tp.drainTime = time.Hour
	relayBurst(t, data, writeSize, out, tp)
	shed, lost := tp.close()
	require.Equal(t, len(data), out.n, "the relay is never cut")
	assert.Positive(t, shedCalls.Load(), "the full queue asked the Tap to shed")
	assert.Less(t, shedCalls.Load(), shedLines.Load()/100, "Shed is asked of chunks, not of lines")
	assert.Zero(t, shed)
	assert.Positive(t, lost, "the burst outgrew the queue and its reserve")
	assert.Equal(t, int64(warns), int64(got)+lost, "every line was delivered or counted lost")
}

// TestTapKeepsALongLineWhileBehind: a line that is not noise, up to
// MaxLine long or cut to it, is kept while the queue is full, and so is
// the line after it.
func TestTapKeepsALongLineWhileBehind(t *testing.T) {
	for _, n := range []int{50_000, MaxLine - 1, MaxLine, 70_000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			head, _ := burst(200_000, 1_000_000) // INFO lines only
			long := append(bytes.Repeat([]byte("x"), n), '\n')
			warn := []byte("gpu-node-01:31010:31107 [2] misc/socket.cc:50 NCCL WARN after the long line\n")
			data := append(append(append(head, long...), warn...), head...)
			out := &countWriter{want: len(data), full: make(chan struct{})}
			var once sync.Once
			var got [][]byte
			tp := newTap(lineTap{line: func(_ Stream, line []byte) {
				once.Do(func() { <-out.full })
				if !infoNoise(line) {
					got = append(got, bytes.Clone(line))
				}
			}, noise: infoNoise})
			tp.drainTime = time.Hour
			relayBurst(t, data, writeSize, out, tp)
			_, lost := tp.close()
			require.Equal(t, len(data), out.n)
			assert.Zero(t, lost)
			require.Len(t, got, 2, "the long line and the WARN line after it")
			assert.Len(t, got[0], min(n, MaxLine), "the long line, cut to MaxLine")
			assert.Equal(t, string(warn[:len(warn)-1]), string(got[1]))
		})
	}
}

// TestTapKeepsEverythingWhenItKeepsUp: without pressure nothing is shed,
// noise included, and a last line without a newline is delivered.
func TestTapKeepsEverythingWhenItKeepsUp(t *testing.T) {
	data, _ := burst(2000, 10)
	data = append(data, "tail"...)
	out := &countWriter{want: len(data), full: make(chan struct{})}
	var lines []string
	delivered := make(chan struct{}, 1)
	tp := newTap(lineTap{line: func(_ Stream, line []byte) {
		lines = append(lines, string(line))
		delivered <- struct{}{}
	}, noise: infoNoise})
	r, w, err := os.Pipe()
	require.NoError(t, err)
	go func() {
		// One line a write, each after the tap took the one before: the
		// queue never holds more than one chunk.
		defer w.Close()
		for _, l := range bytes.SplitAfter(data, []byte("\n")) {
			_, _ = w.Write(l)
			if bytes.HasSuffix(l, []byte("\n")) {
				<-delivered
			}
		}
	}()
	relay(r, out, Stdout, tp, nil)
	go func() { <-delivered }() // the tail's
	shed, lost := tp.close()
	assert.Zero(t, shed)
	assert.Zero(t, lost)
	assert.Equal(t, strings.Split(string(data), "\n"), lines)
}

// TestRunGrowsTheChildsPipe: the child writes into a pipe of childPipeSize
// (ncclrun is root here, or its allowance permits it), not a 64 KiB one.
func TestRunGrowsTheChildsPipe(t *testing.T) {
	cfg := helperConfig(t, "pipe-size")
	var out bytes.Buffer
	cfg.Stdout = &out
	res, err := Run(cfg)
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode)
	max, err := os.ReadFile("/proc/sys/fs/pipe-max-size")
	require.NoError(t, err)
	want := min(childPipeSize, atoi(strings.TrimSpace(string(max))))
	if os.Geteuid() != 0 {
		want = 64 << 10 // at least the default: the fallback may apply
	}
	var n int
	_, err = fmt.Sscan(out.String(), &n)
	require.NoError(t, err, out.String())
	assert.GreaterOrEqual(t, n, want, out.String())
}

// TestTapFinalDrainIsBounded: a tap far behind at the end (stalled until
// the output ended, every line a WARN) delivers at least the first
// tapDrainLines lines and then, once tapDrainTime passed, counts the rest
// lost instead of making ncclrun wait for the matcher.
func TestTapFinalDrainIsBounded(t *testing.T) {
	data, warns := burst(20_000, 1) // WARN lines only
	out := &countWriter{want: len(data), full: make(chan struct{})}
	stall := make(chan struct{})
	var once sync.Once
	got := 0
	tp := newTap(lineTap{line: func(_ Stream, line []byte) {
		once.Do(func() { <-stall })
		got++
		if got == tapDrainLines+1 {
			time.Sleep(2 * tapDrainTime) // a slow line: the time bound passes
		}
	}, noise: infoNoise})
	relayBurst(t, data, writeSize, out, tp)
	res := make(chan int64)
	go func() { _, lost := tp.close(); res <- lost }()
	for !tp.closing.Load() { // close has begun: every line from now on is the final drain's
		runtime.Gosched()
	}
	close(stall)
	lost := <-res
	assert.GreaterOrEqual(t, got, tapDrainLines, "the first lines after the end are always delivered")
	assert.Less(t, got, warns/2, "the rest is not waited for")
	assert.Equal(t, int64(warns-got), lost, "what was not delivered is counted lost")
}

// tapLines feeds chunks to a lineSplitter as the relay does, each chunk
// read by one read(2) (or several, when longer than a read), and returns
// what the tap got, in order.
func tapLines(t *testing.T, chunks []string) []string {
	t.Helper()
	var got []string
	tp := newTap(lineTap{line: func(_ Stream, l []byte) { got = append(got, string(l)) }})
	tp.drainTime = time.Hour
	ls := &lineSplitter{t: tp, s: Stdout}
	for _, c := range chunks {
		for p := c; len(p) > 0; {
			k := min(len(p), relayReadSize)
			ls.add([]byte(p[:k]))
			require.LessOrEqual(t, len(ls.part), MaxLine, "the carried line is bounded")
			p = p[k:]
		}
	}
	ls.finish()
	shed, lost := tp.close()
	require.Zero(t, shed)
	require.Zero(t, lost)
	return got
}

// TestTapLines: what the relay reads is cut into lines for the tap as it
// arrives, whatever the reads' boundaries; a line over MaxLine reaches
// the tap cut to what a terminal shows of it: from its last '\r', at most
// MaxLine bytes.
func TestTapLines(t *testing.T) {
	long := strings.Repeat("y", MaxLine+10)
	exact := strings.Repeat("e", MaxLine)
	huge := strings.Repeat("h", 3*relayReadSize+7)
	bars := strings.Repeat("\r 10%|####  | 7/5000", MaxLine/20+1)
	tests := []struct {
		name   string
		chunks []string
		want   []string
	}{
		{"simple", []string{"a\nb\n"}, []string{"a", "b"}},
		{"split across reads", []string{"he", "llo\nwor", "ld\n"}, []string{"hello", "world"}},
		{"empty lines", []string{"\n\n"}, []string{"", ""}},
		{"no trailing newline", []string{"tail"}, []string{"tail"}},
		{"no trailing newline after lines", []string{"a\nta", "il"}, []string{"a", "tail"}},
		{"carriage return kept", []string{"a\r\n"}, []string{"a\r"}},
		{"long line cut", []string{long + "\nnext\n"}, []string{long[:MaxLine], "next"}},
		{"long line over reads", []string{long[:100], long[100:], "\nz"}, []string{long[:MaxLine], "z"}},
		{"long line then lines in one read", []string{"a\n" + long[:100], long[100:] + "\nb\nc"}, []string{"a", long[:MaxLine], "b", "c"}},
		{"long line without newline at the end", []string{"a\n" + long}, []string{"a", long[:MaxLine]}},
		{"a line longer than a read", []string{huge + "\nb\n"}, []string{huge[:MaxLine], "b"}},
		{"exactly MaxLine not cut", []string{exact, "\n"}, []string{exact}},
		{"exactly MaxLine in one read", []string{exact + "\n"}, []string{exact}},
		{"two long lines in one read", []string{long + "\n" + long + "\n"}, []string{long[:MaxLine], long[:MaxLine]}},
		{"long redraws keep the last", []string{bars + "\rnccl\n"}, []string{"\rnccl"}},
		{"long redraws over reads", []string{bars[:100], bars[100:], "\rnccl\r\n"}, []string{"\rnccl"}},
		{"long redraws, long last run", []string{bars + "\r" + long + "\n"}, []string{"\r" + long[:MaxLine-1]}},
		{"long redraws, CRLF ending", []string{long + "\r\r\n"}, []string{long[:MaxLine]}},
		{"long redraws without newline at the end", []string{bars[:7], bars[7:] + "\rnccl"}, []string{"\rnccl"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tapLines(t, tt.chunks))
		})
	}
}

// TestTapBoundedOnHugeLine: a 1 GiB line without a newline costs no more
// than the relay's buffer; the tap gets its first MaxLine bytes.
func TestTapBoundedOnHugeLine(t *testing.T) {
	chunk := strings.Repeat("q", relayReadSize)
	chunks := make([]string, 0, (1<<30)/relayReadSize+1)
	for i := 0; i < (1<<30)/relayReadSize; i++ {
		chunks = append(chunks, chunk)
	}
	got := tapLines(t, append(chunks, "\nafter\n"))
	require.Len(t, got, 2)
	assert.Len(t, got[0], MaxLine)
	assert.Equal(t, "after", got[1])
}

func FuzzTapLines(f *testing.F) {
	f.Add([]byte("a\nb\r\nc"), uint16(3))
	f.Add(bytes.Repeat([]byte("x"), MaxLine+10), uint16(7000))
	f.Add([]byte("\n\n\n"), uint16(1))
	f.Fuzz(func(t *testing.T, data []byte, chunk uint16) {
		n := int(chunk)%4096 + 1
		var chunks []string
		for p := data; len(p) > 0; {
			k := min(n, len(p))
			chunks = append(chunks, string(p[:k]))
			p = p[k:]
		}
		got := tapLines(t, chunks)
		// Every line is delivered: whole when short, cut to MaxLine when long.
		want := strings.Split(string(data), "\n")
		if len(want) > 0 && want[len(want)-1] == "" {
			want = want[:len(want)-1]
		}
		for i, w := range want {
			if len(w) > MaxLine {
				want[i] = w[:MaxLine]
			}
		}
		if len(want) == 0 {
			want = nil
		}
		require.Equal(t, want, got)
	})
}

// pipeOut is a pipe for the relay's output, and what came out of it once
// the relay has returned (received closes the pipe's write end).
func pipeOut(t *testing.T) (*os.File, func() []byte) {
	r, w, err := os.Pipe()
	require.NoError(t, err)
	var got bytes.Buffer
	done := make(chan struct{})
	go func() { defer close(done); _, _ = io.Copy(&got, r); r.Close() }()
	return w, func() []byte { w.Close(); <-done; return got.Bytes() }
}

// TestRelayEveryByte: the relay's output is byte for byte the child's,
// into a pipe, a file, a file opened to append, a writer that is not a
// file; once the reader is gone the output is read and discarded, and
// the tap still gets every line, in order.
func TestRelayEveryByte(t *testing.T) {
	data, warns := burst(200_000, 100) // ~19 MiB
	for _, tc := range []struct {
		name string
		// open returns the relay's output, and what it received once the
		// relay has returned.
		open   func(t *testing.T) (io.Writer, func() []byte)
		broken bool // the reader is gone: nothing is received, onErr is called
	}{
		{"pipe", func(t *testing.T) (io.Writer, func() []byte) { return pipeOut(t) }, false},
		{"file", func(t *testing.T) (io.Writer, func() []byte) {
			p := filepath.Join(t.TempDir(), "out")
			f, err := os.Create(p)
			require.NoError(t, err)
			return f, func() []byte { f.Close(); b, err := os.ReadFile(p); require.NoError(t, err); return b }
		}, false},
		{"append-only file", func(t *testing.T) (io.Writer, func() []byte) {
			p := filepath.Join(t.TempDir(), "append")
			f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
			require.NoError(t, err)
			return f, func() []byte { f.Close(); b, err := os.ReadFile(p); require.NoError(t, err); return b }
		}, false},
		{"not a file", func(t *testing.T) (io.Writer, func() []byte) {
			var b bytes.Buffer
			return &b, func() []byte { return b.Bytes() }
		}, false},
		{"reader gone", func(t *testing.T) (io.Writer, func() []byte) {
			r, w, err := os.Pipe()
			require.NoError(t, err)
			r.Close()
			return w, func() []byte { w.Close(); return nil }
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			seen := 0
			tp := newTap(lineTap{line: func(_ Stream, l []byte) {
				seen++
				if bytes.Contains(l, []byte(" NCCL WARN ")) {
					got = append(got, string(l))
				}
			}, noise: infoNoise})
			tp.drainTime = time.Hour
			out, received := tc.open(t)
			r, w, err := os.Pipe()
			require.NoError(t, err)
			go func() { defer w.Close(); writeChunks(w, data, writeSize) }()
			var errs []error
			relay(r, out, Stdout, tp, func(_ Stream, err error) { errs = append(errs, err) })
			shed, lost := tp.close()
			b := received()
			if tc.broken {
				require.Len(t, errs, 1)
				assert.ErrorIs(t, errs[0], unix.EPIPE)
			} else {
				require.Empty(t, errs)
				require.True(t, bytes.Equal(data, b), "byte for byte: %d of %d bytes", len(b), len(data))
			}
			assert.Zero(t, lost)
			assert.Equal(t, int64(200_000), int64(seen)+shed, "every line delivered or shed")
			require.Len(t, got, warns)
			for i, l := range got {
				require.Contains(t, l, fmt.Sprintf(" warning %d: ", i), "WARN lines in order")
			}
		})
	}
}

// TestCutLong: a line over MaxLine is cut to MaxLine bytes from its last
// '\r' (not one of its ending) wherever it lies among short ones; the
// others stay as they are.
func TestCutLong(t *testing.T) {
	long := strings.Repeat("l", MaxLine+5)
	exact := strings.Repeat("e", MaxLine)
	short := strings.Repeat("s\n", MaxLine)
	bars := strings.Repeat("\r 10%|####  | 7/5000", MaxLine/20+1)
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"a\nb\n", "a\nb\n"},
		{exact + "\n", exact + "\n"},
		{short + exact + "\n" + short, short + exact + "\n" + short},
		{long + "\n", long[:MaxLine] + "\n"},
		{short + long + "\nz\n", short + long[:MaxLine] + "\nz\n"},
		{"a\n" + long + "\n" + long + "\n", "a\n" + long[:MaxLine] + "\n" + long[:MaxLine] + "\n"},
		{"a\n" + bars + "\rnccl\r\nz\n", "a\n\rnccl\r\nz\n"},
		{bars + "\r" + long + "\n", "\r" + long[:MaxLine-1] + "\n"},
		{long + "\r\r\n", long[:MaxLine] + "\n"},
	} {
		got := cutLong([]byte(tc.in))
		assert.Equal(t, len(tc.want), len(got))
		assert.True(t, string(got) == tc.want, "%d bytes in", len(tc.in))
	}
}
