//go:build linux

package launcher

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// infoNoise is the tests' Shed: NCCL INFO lines are noise.
func infoNoise(line []byte) bool { return bytes.Contains(line, []byte(" NCCL INFO ")) }

// infoNoiseLines is the tests' ShedLines: infoNoise for each line of p.
func infoNoiseLines(p []byte, keep func([]byte)) (n, size int) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if infoNoise(p[:i]) {
			n++
			size += i + 1
		} else {
			keep(p[:i])
		}
		p = p[i+1:]
	}
	return n, size
}

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

// relayBurst relays data through a pipe in chunks of chunk bytes into
// out, with the tap t, and returns when the relay has returned.
func relayBurst(t *testing.T, data []byte, chunk int, out *countWriter, tp *tap) {
	t.Helper()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	go func() { defer w.Close(); writeChunks(w, data, chunk) }()
	relay(r, out, Stdout, tp)
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

// TestTapKeepsEveryWarnLineOfABurst: the tap's consumer stalls on the
// first line until the relay has written the whole burst (64 MiB of INFO
// lines with a WARN line every 1000), so the queue is full for nearly all
// of it; every WARN line still reaches OnLine, in order, and only INFO
// lines are shed. Lines are counted, nothing is timed.
func TestTapKeepsEveryWarnLineOfABurst(t *testing.T) {
	data, warns := burst(600_000, 1000)
	for _, tc := range []struct {
		chunk     int
		shedLines func([]byte, func([]byte)) (int, int)
		feed      bool // FeedLines set: the chunks shed while behind go to it
	}{ // reads whole, and cut inside lines; the tap shedding line by line or a chunk at once, or feeding chunks
		{relayBufSize, nil, false}, {4096, nil, false}, {1000, nil, false}, {relayBufSize, infoNoiseLines, false}, {1000, infoNoiseLines, false},
		{relayBufSize, infoNoiseLines, true}, {1000, infoNoiseLines, true},
	} {
		chunk := tc.chunk
		t.Run(fmt.Sprintf("%d/lines=%v/feed=%v", chunk, tc.shedLines != nil, tc.feed), func(t *testing.T) {
			out := &countWriter{want: len(data), full: make(chan struct{})}
			var once sync.Once
			var got []string
			info := 0
			onLine := func(_ Stream, line []byte) {
				once.Do(func() { <-out.full })
				if bytes.Contains(line, []byte(" NCCL WARN ")) {
					got = append(got, string(line))
				} else {
					info++
				}
			}
			var feedLines func(Stream, []byte, bool) (int, int)
			if tc.feed {
				feedLines = feedLinesOf(onLine)
			}
			tp := newTap(onLine, infoNoise, tc.shedLines, feedLines)
			tp.drainTime = time.Hour // every line counts here, however slow the machine
			tp.budget = nil          // and the whole burst is read, however fast
			relayBurst(t, data, chunk, out, tp)
			st := tp.close()
			require.Equal(t, len(data), out.n, "the relay is never cut")
			require.Len(t, got, warns, "every WARN line reached OnLine (%+v)", st)
			for i, l := range got {
				require.True(t, strings.Contains(l, fmt.Sprintf(" warning %d: ", i)), "WARN lines in order: %d is %q", i, l)
			}
			assert.Zero(t, st.Lost)
			assert.Positive(t, st.Shed, "INFO lines were shed under pressure")

			assert.Equal(t, int64(600_000-warns), st.Shed+int64(info), "every INFO line was delivered or shed")
			infoLen := bytes.IndexByte(data, '\n') + 1 // every INFO line has this length
			assert.Equal(t, st.Shed*int64(infoLen), st.Dropped, "dropped bytes are the shed lines'")
		})
	}
}

// TestTapKeepsALongLineWhileBehind: a line that is not noise, up to
// MaxLine long or cut to it, is kept while the queue is full, and so is
// the line after it (a review found a kept buffer of MaxLine bytes lost
// both: the cut line and its newline did not fit in an empty one).
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
			onLine := func(_ Stream, line []byte) {
				once.Do(func() { <-out.full })
				if !infoNoise(line) {
					got = append(got, bytes.Clone(line))
				}
			}
			tp := newTap(onLine, infoNoise, nil, nil)
			tp.drainTime = time.Hour
			tp.budget = nil
			relayBurst(t, data, relayBufSize, out, tp)
			st := tp.close()
			require.Equal(t, len(data), out.n)
			assert.Zero(t, st.Lost, "%+v", st)
			require.Len(t, got, 2, "the long line and the WARN line after it")
			assert.Len(t, got[0], min(n, MaxLine), "the long line, cut to MaxLine")
			assert.Equal(t, string(warn[:len(warn)-1]), string(got[1]))
		})
	}
}

// TestTapKeepsEverythingWhenOnLineKeepsUp: without pressure nothing is
// shed, noise included, and a last line without a newline is delivered.
func TestTapKeepsEverythingWhenOnLineKeepsUp(t *testing.T) {
	data, _ := burst(2000, 10)
	data = append(data, "tail"...)
	out := &countWriter{want: len(data), full: make(chan struct{})}
	var lines []string
	delivered := make(chan struct{}, 1)
	tp := newTap(func(_ Stream, line []byte) {
		lines = append(lines, string(line))
		delivered <- struct{}{}
	}, infoNoise, infoNoiseLines, nil)
	r, w, err := os.Pipe()
	require.NoError(t, err)
	go func() {
		// One line a write, each after the tap delivered the one before:
		// the queue never holds more than one chunk.
		defer w.Close()
		for _, l := range bytes.SplitAfter(data, []byte("\n")) {
			_, _ = w.Write(l)
			if bytes.HasSuffix(l, []byte("\n")) {
				<-delivered
			}
		}
	}()
	relay(r, out, Stdout, tp)
	go func() { <-delivered }() // the tail's
	st := tp.close()
	assert.Equal(t, TapStats{}, st)
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

// TestTapFinalDrainIsBounded: a tap far behind at the end (its LineFunc
// stalled until the output ended, every line a WARN) delivers the first
// tapDrainLines kept lines and then, once tapDrainTime passed, counts the
// rest lost instead of making ncclrun wait for the matcher.
func TestTapFinalDrainIsBounded(t *testing.T) {
	data, warns := burst(20_000, 1) // WARN lines only
	out := &countWriter{want: len(data), full: make(chan struct{})}
	stall := make(chan struct{})
	var once sync.Once
	got := 0
	tp := newTap(func(_ Stream, line []byte) {
		once.Do(func() { <-stall })
		got++
		if got == tapDrainLines+1 {
			time.Sleep(2 * tapDrainTime) // a slow line: the time bound passes
		}
	}, infoNoise, infoNoiseLines, nil)
	relayBurst(t, data, relayBufSize, out, tp)
	res := make(chan TapStats)
	go func() { res <- tp.close() }()
	for !tp.closing.Load() { // close has begun: every line from now on is the final drain's
		runtime.Gosched()
	}
	close(stall)
	st := <-res
	assert.GreaterOrEqual(t, got, tapDrainLines, "the first lines after the end are always delivered")
	assert.Less(t, got, warns/2, "the rest is not waited for")
	assert.Equal(t, int64(warns-got), st.Lost, "what was not delivered is counted lost")
}

// tapLines feeds chunks to a tapStream as the relay does, each chunk read
// by one read(2) (or several, when longer than a read), and returns what
// OnLine got, in order.
func tapLines(t *testing.T, chunks []string) []string {
	t.Helper()
	var got []string
	tp := newTap(func(_ Stream, l []byte) { got = append(got, string(l)) }, nil, nil, nil)
	tp.drainTime = time.Hour
	tp.budget = nil // and the whole burst is read, however fast
	ts := tp.stream(Stdout)
	for _, c := range chunks {
		for p := c; len(p) > 0; {
			k := copy((*ts.cur)[ts.c:ts.c+relayReadSize], p)
			ts.offer(k)
			require.LessOrEqual(t, ts.c, MaxLine+1, "the carried line is bounded")
			p = p[k:]
		}
	}
	ts.finish()
	st := tp.close()
	require.Equal(t, TapStats{}, st)
	return got
}

// TestTapLines: what the relay reads is cut into lines for OnLine as it
// arrives, whatever the reads' boundaries; a line over MaxLine reaches
// OnLine cut to its first MaxLine bytes.
func TestTapLines(t *testing.T) {
	long := strings.Repeat("y", MaxLine+10)
	exact := strings.Repeat("e", MaxLine)
	huge := strings.Repeat("h", 3*relayReadSize+7)
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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tapLines(t, tt.chunks))
		})
	}
}

// TestTapBoundedOnHugeLine: a 1 GiB line without a newline costs no more
// than the relay's buffer; OnLine gets its first MaxLine bytes.
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

// TestTapFeedsChunksWhileBehind: while the tap is behind (its consumer
// stalled until the relay has read the whole burst), the chunks it would
// shed go to FeedLines whole; with the kept lines the relay set aside and
// the final drain, every WARN line still reaches OnLine, in order.
func TestTapFeedsChunksWhileBehind(t *testing.T) {
	data, warns := burst(20_000, 100)
	out := &countWriter{want: len(data), full: make(chan struct{})}
	release, fed := make(chan struct{}), make(chan struct{})
	var once, fedOnce sync.Once
	var got []string
	fedChunks, fedLines := 0, 0
	onLine := func(_ Stream, line []byte) {
		once.Do(func() { <-release })
		if bytes.Contains(line, []byte(" NCCL WARN ")) {
			got = append(got, string(line))
		}
	}
	feed := feedLinesOf(onLine)
	feedLines := func(s Stream, p []byte, shed bool) (int, int) {
		if !shed {
			return feed(s, p, shed)
		}
		fedChunks++
		fedLines += bytes.Count(p, []byte("\n"))
		defer fedOnce.Do(func() { close(fed) })
		return feed(s, p, shed)
	}
	tp := newTap(onLine, infoNoise, infoNoiseLines, feedLines)
	tp.drainTime = time.Hour // every line counts here, however slow the machine
	tp.budget = nil          // and the whole burst is read, however fast
	relayBurst(t, data, relayBufSize, out, tp)
	close(release) // the relay has read it all: the queue is full, the tap behind
	<-fed          // the next chunk went to FeedLines (the drain's would not)
	st := tp.close()
	require.Positive(t, fedChunks, "chunks went to FeedLines")
	require.Len(t, got, warns, "every WARN line reached OnLine (%+v)", st)
	for i, l := range got {
		require.Contains(t, l, fmt.Sprintf(" warning %d: ", i), "in order")
	}
	assert.Zero(t, st.Lost)
	assert.Positive(t, st.Shed)
	assert.Positive(t, fedLines)
}

// feedLinesOf is what a Config.FeedLines does: OnLine's work for the lines
// it keeps (all of them when shed is false).
func feedLinesOf(onLine LineFunc) func(Stream, []byte, bool) (int, int) {
	return func(s Stream, p []byte, shed bool) (int, int) {
		if !shed {
			for len(p) > 0 {
				i := bytes.IndexByte(p, '\n')
				onLine(s, p[:i])
				p = p[i+1:]
			}
			return 0, 0
		}
		return infoNoiseLines(p, func(line []byte) { onLine(s, line) })
	}
}
