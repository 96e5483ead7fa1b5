package launcher

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand"
	"os"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// numberedLines returns n lines "line 000000" ... in one block.
func numberedLines(n int) []byte {
	var b []byte
	for i := 0; i < n; i++ {
		b = fmt.Appendf(b, "line %06d\n", i)
	}
	return b
}

// writeInPieces writes data to w in random-size writes and closes w.
func writeInPieces(w io.WriteCloser, data []byte, seed int64) {
	defer w.Close()
	sizes := rand.New(rand.NewSource(seed))
	for len(data) > 0 {
		k := min(len(data), 1+sizes.Intn(70000))
		if _, err := w.Write(data[:k]); err != nil {
			return
		}
		data = data[k:]
	}
}

// lineShape is what a delivered line may look like: a whole line, or the
// start of one that a gap cut short (never two lines glued together).
var lineShape = regexp.MustCompile(`^(l(i(n(e( [0-9]{0,6})?)?)?)?)?$`)

// pipes returns a pipe that the test writes into (the child's stdout)
// and one that the relay writes into (ncclrun's stdout).
func pipes(t *testing.T) (childR, childW, outR, outW *os.File) {
	t.Helper()
	childR, childW, err := os.Pipe()
	require.NoError(t, err)
	outR, outW, err = os.Pipe()
	require.NoError(t, err)
	t.Cleanup(func() { childW.Close(); outR.Close(); outW.Close() })
	return childR, childW, outR, outW
}

func TestSpliceRelayExactWithTap(t *testing.T) {
	data := numberedLines(300000) // 3.4 MiB
	childR, childW, outR, outW := pipes(t)
	var got []string
	tp := newTap(func(s Stream, l []byte) {
		assert.Equal(t, Stderr, s)
		got = append(got, string(l))
	})
	go writeInPieces(childW, data, 1)
	sum := make(chan [32]byte)
	go func() {
		h := sha256.New()
		_, _ = io.Copy(h, outR)
		sum <- [32]byte(h.Sum(nil))
	}()
	rfd, _ := rawFD(childR)
	wfd, _ := rawFD(outW)
	require.True(t, spliceRelay(childR, rfd, wfd, Stderr, tp, nil), "both ends are pipes: splice")
	outW.Close()
	dropped := tp.close()
	assert.Equal(t, sha256.Sum256(data), <-sum, "relayed bytes differ")
	for _, l := range got {
		require.Regexp(t, lineShape, l)
	}
	if dropped == 0 { // the tap kept up: it saw every line, in order
		require.Len(t, got, 300000)
		assert.Equal(t, "line 000000", got[0])
		assert.Equal(t, "line 299999", got[len(got)-1])
	}
}

func TestSpliceRelayDropsFromTapAtLineBoundaries(t *testing.T) {
	// 1. The tap stalls while 9 MiB are relayed: it drops most of them.
	// 2. Then sync lines are written one at a time until one reaches the
	//    tap: it caught up, and sees what follows the gap.
	// Each gap must cut a line, never glue two pieces together.
	const syncLine = "line 999999"
	data := numberedLines(800000)
	childR, childW, outR, outW := pipes(t)
	relayed := make(chan struct{})
	synced := make(chan struct{})
	var got []string
	var once, syncOnce sync.Once
	tp := newTap(func(_ Stream, l []byte) {
		once.Do(func() { <-relayed })
		if string(l) == syncLine {
			syncOnce.Do(func() { close(synced) })
		}
		got = append(got, string(l))
	})
	go func() {
		defer childW.Close()
		writeAll := func(p []byte) {
			_, err := childW.Write(p)
			assert.NoError(t, err)
		}
		for i := 0; i < len(data); i += 65536 {
			writeAll(data[i:min(i+65536, len(data))])
		}
		close(relayed) // the pipes are small: most of it has been relayed
		for {
			select {
			case <-synced:
				return
			default:
				writeAll([]byte(syncLine + "\n"))
			}
		}
	}()
	out := make(chan []byte)
	go func() { b, _ := io.ReadAll(outR); out <- b }()
	relayAuto(childR, outW, Stdout, tp, nil)
	outW.Close()
	dropped := tp.close()
	b := <-out
	require.True(t, bytes.HasPrefix(b, data), "the relay never drops")
	assert.Empty(t, bytes.ReplaceAll(b[len(data):], []byte(syncLine+"\n"), nil))
	assert.Positive(t, dropped, "a stalled tap drops tap data")
	prev := -1
	for _, l := range got {
		require.Regexp(t, lineShape, l, "a gap must not glue two lines together")
		if len(l) == len(syncLine) && l != syncLine {
			n, err := strconv.Atoi(l[5:])
			require.NoError(t, err)
			require.Greater(t, n, prev, "lines stay in order")
			prev = n
		}
	}
	assert.Positive(t, prev, "whole lines reached the tap")
	assert.Equal(t, syncLine, got[len(got)-1], "the tap sees what follows a gap")
}

func TestSpliceRelayPartialLineAtOnce(t *testing.T) {
	childR, childW, outR, outW := pipes(t)
	done := make(chan struct{})
	go func() { relayAuto(childR, outW, Stdout, newTap(func(Stream, []byte) {}), nil); close(done) }()
	_, err := childW.WriteString("progress 10%\r")
	require.NoError(t, err)
	got := make([]byte, len("progress 10%\r"))
	_, err = io.ReadFull(outR, got) // the child still holds its pipe open
	require.NoError(t, err)
	assert.Equal(t, "progress 10%\r", string(got))
	childW.Close()
	<-done
}

func TestSpliceRelayReaderGoneDrainsChild(t *testing.T) {
	data := numberedLines(200000) // 2.3 MiB: blocks the child unless drained
	childR, childW, outR, outW := pipes(t)
	outR.Close()
	var errs []error
	var lines int
	tp := newTap(func(Stream, []byte) { lines++ })
	wrote := make(chan struct{})
	go func() { writeInPieces(childW, data, 3); close(wrote) }()
	relayAuto(childR, outW, Stdout, tp, func(s Stream, err error) {
		assert.Equal(t, Stdout, s)
		errs = append(errs, err)
	})
	<-wrote
	tp.close()
	require.Len(t, errs, 1, "the write error is said once")
	assert.ErrorIs(t, errs[0], syscall.EPIPE)
	assert.Positive(t, lines, "the tap still sees the output")
}

func TestRelayAutoCopiesWhenNotAPipe(t *testing.T) {
	childR, childW, _, _ := pipes(t)
	var out bytes.Buffer
	go writeInPieces(childW, numberedLines(1000), 4)
	relayAuto(childR, &out, Stdout, nil, nil)
	assert.Equal(t, numberedLines(1000), out.Bytes())
}

// BenchmarkRelayPipes compares the copying relay with the splicing one,
// pipe to pipe (as `ncclrun run -- cat F | cat` has it), without and with
// a tap whose OnLine does nothing; MB/s is relayed bytes.
func BenchmarkRelayPipes(b *testing.B) {
	block := ncclBlock(4 << 20)
	for _, tc := range []struct {
		name   string
		splice bool
		tap    bool
	}{
		{"copy/no-tap", false, false},
		{"splice/no-tap", true, false},
		{"copy/tap-noop", false, true},
		{"splice/tap-noop", true, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			out, wait := drainPipe(b)
			var t *tap
			if tc.tap {
				t = newTap(func(Stream, []byte) {})
			}
			b.SetBytes(benchChunk)
			b.ResetTimer()
			in := feedPipe(b, block, b.N)
			if tc.splice {
				relayAuto(in, out, Stdout, t, nil)
			} else {
				relayNotify(in, out, Stdout, t, nil)
			}
			var dropped int64
			if t != nil {
				dropped = t.close()
			}
			wait()
			b.StopTimer()
			b.ReportMetric(float64(dropped)/float64(b.N), "dropped/op")
		})
	}
}
