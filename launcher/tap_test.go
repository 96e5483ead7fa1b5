//go:build linux

package launcher

import (
	"bytes"
	"fmt"
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
	go func() {
		defer w.Close()
		for p := data; len(p) > 0; {
			k := min(chunk, len(p))
			if _, err := w.Write(p[:k]); err != nil {
				return
			}
			p = p[k:]
		}
	}()
	relay(r, out, Stdout, tp)
}

// TestTapKeepsEveryWarnLineOfABurst: the tap's consumer stalls on the
// first line until the relay has written the whole burst (64 MiB of INFO
// lines with a WARN line every 1000), so the queue is full for nearly all
// of it; every WARN line still reaches OnLine, in order, and only INFO
// lines are shed. Lines are counted, nothing is timed.
func TestTapKeepsEveryWarnLineOfABurst(t *testing.T) {
	data, warns := burst(600_000, 1000)
	for _, chunk := range []int{relayBufSize, 4096, 1000} { // reads whole, and cut inside lines
		t.Run(fmt.Sprint(chunk), func(t *testing.T) {
			out := &countWriter{want: len(data), full: make(chan struct{})}
			var once sync.Once
			var got []string
			info := 0
			tp := newTap(func(_ Stream, line []byte) {
				once.Do(func() { <-out.full })
				if bytes.Contains(line, []byte(" NCCL WARN ")) {
					got = append(got, string(line))
				} else {
					info++
				}
			}, infoNoise)
			tp.drainTime = time.Hour // every line counts here, however slow the machine
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
	}, infoNoise)
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
	}, infoNoise)
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
