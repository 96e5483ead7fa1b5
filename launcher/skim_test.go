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
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestTapBudget: the tap may read while both buckets hold something; the
// byte bucket refills at its rate up to its size, the time bucket at
// tapShare of the time up to tapShareBurst, less the tap's work.
func TestTapBudget(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, tc := range []struct {
		name  string
		steps []func(b *tapBudget) bool // each returns what allows says, after its own spending
		want  []bool
	}{
		{"a fresh budget allows", []func(*tapBudget) bool{
			func(b *tapBudget) bool { return b.allows(t0, 0) },
		}, []bool{true}},
		{"the burst spent, it refuses until the rate refills it", []func(*tapBudget) bool{
			func(b *tapBudget) bool { b.allows(t0, 0); b.spend(2 << 20); return b.allows(t0, 0) },
			func(b *tapBudget) bool { return b.allows(t0.Add(time.Millisecond), 0) },      // 1 KiB back: still 1 MiB in debt
			func(b *tapBudget) bool { return b.allows(t0.Add(1500*time.Millisecond), 0) }, // 1.5 MiB back
		}, []bool{false, false, true}},
		{"the byte bucket holds at most its size", []func(*tapBudget) bool{
			func(b *tapBudget) bool { return b.allows(t0, 0) },
			func(b *tapBudget) bool {
				b.allows(t0.Add(time.Hour), 0)
				b.spend(1<<20 + 1)
				return b.allows(t0.Add(time.Hour), 0)
			},
		}, []bool{true, false}},
		{"the tap's work spends the time bucket", []func(*tapBudget) bool{
			func(b *tapBudget) bool { return b.allows(t0, int64(tapShareBurst)+1) },
			// tapShare of 4 us refills 1 us: out of the debt of 1 ns
			func(b *tapBudget) bool { return b.allows(t0.Add(4*time.Microsecond), int64(tapShareBurst)+1) },
			func(b *tapBudget) bool { return b.allows(t0.Add(time.Second), int64(tapShareBurst)+1) },
			// the same work is not counted twice; more work is
			func(b *tapBudget) bool { return b.allows(t0.Add(time.Second), int64(2*tapShareBurst)+2) },
		}, []bool{false, true, true, false}},
		{"forgiven, it allows one read whatever is owed", []func(*tapBudget) bool{
			func(b *tapBudget) bool { b.allows(t0, 0); b.spend(2 << 20); b.forgive(); return b.allows(t0, 0) },
			func(b *tapBudget) bool { b.spend(1 << 10); return b.allows(t0, 0) },
			func(b *tapBudget) bool { return b.allows(t0.Add(10*time.Millisecond), 0) }, // still owed
			func(b *tapBudget) bool { return b.allows(t0.Add(3*time.Second), 0) },
		}, []bool{true, false, false, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newTapBudget(1<<20, 1<<20) // 1 MiB a second, 1 MiB at once
			var got []bool
			for _, s := range tc.steps {
				got = append(got, s(b))
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

// testSplicer is a Splicer over a file: it counts the splices, and the
// writes that came while one ran.
type testSplicer struct {
	f               *os.File
	in              bool
	spliced, during int
}

func (s *testSplicer) Write(p []byte) (int, error) {
	if s.in {
		s.during++
	}
	return s.f.Write(p)
}
func (s *testSplicer) SpliceFile() *os.File { return s.f }
func (s *testSplicer) Spliced(splice func() int) {
	s.in = true
	if splice() > 0 {
		s.spliced++
	}
	s.in = false
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

// lineSet is the set of data's lines.
func lineSet(data []byte) map[string]bool {
	m := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		m[l] = true
	}
	return m
}

// TestSkimRelaysEveryByte: past the tap's budget the relay moves the
// output past the tap, by splice(2) into a pipe or a file, by copy into
// what splice refuses (a file opened to append, a writer that is not a
// file), and discards it once the reader is gone; the output is byte for
// byte the child's, the tap gets only whole lines of it (never one cut
// by a skimmed stretch), in order, and counts what it did not read.
func TestSkimRelaysEveryByte(t *testing.T) {
	data, _ := burst(200_000, 100) // ~19 MiB
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
		{"a splicer over a pipe", func(t *testing.T) (io.Writer, func() []byte) {
			w, received := pipeOut(t)
			sp := &testSplicer{f: w}
			return sp, func() []byte {
				b := received()
				assert.Positive(t, sp.spliced, "the relay spliced through Spliced")
				assert.Zero(t, sp.during, "no Write while a splice ran")
				return b
			}
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
		for _, budget := range []struct {
			name        string
			rate, burst int64
		}{
			{"all skimmed", 1, 0},
			{"part skimmed", 50 << 20, 64 << 10},
		} {
			t.Run(tc.name+"/"+budget.name, func(t *testing.T) {
				lines := lineSet(data)
				var mu sync.Mutex
				var got []string
				tp := newTap(func(_ Stream, l []byte) { mu.Lock(); got = append(got, string(l)); mu.Unlock() }, nil, nil, nil)
				tp.drainTime = time.Hour
				tp.budget = newTapBudget(budget.rate, budget.burst)
				out, received := tc.open(t)
				r, w, err := os.Pipe()
				require.NoError(t, err)
				go func() { defer w.Close(); writeChunks(w, data, relayBufSize) }()
				var errs []error
				relayNotify(r, out, Stdout, tp, func(_ Stream, err error) { errs = append(errs, err) }, nil)
				st := tp.close()
				b := received()
				if tc.broken {
					require.Len(t, errs, 1)
					assert.ErrorIs(t, errs[0], unix.EPIPE)
				} else {
					require.Empty(t, errs)
					require.True(t, bytes.Equal(data, b), "byte for byte: %d of %d bytes", len(b), len(data))
				}
				assert.Positive(t, st.Unread, "%+v", st)
				assert.LessOrEqual(t, st.Unread, st.Dropped)
				n := 0
				for _, l := range got {
					require.True(t, lines[l], "a whole line of the output: %q", l)
					n += len(l) + 1
				}
				assert.Equal(t, int64(len(data)), int64(n)+st.Dropped, "every byte delivered or dropped (%+v)", st)
				var seq []int
				for _, l := range got {
					if i := strings.Index(l, " warning "); i >= 0 {
						var k int
						_, err := fmt.Sscan(l[i+len(" warning "):], &k)
						require.NoError(t, err)
						seq = append(seq, k)
					}
				}
				assert.IsIncreasing(t, seq, "WARN lines in order")
			})
		}
	}
}

// TestSkimSeesTheEnd: the child's output ends while nobody reads the
// relay's output (the end of the child's pipe is seen without more data
// to wake the relay): the relay returns, and the bytes are all there for
// the reader that comes later.
func TestSkimSeesTheEnd(t *testing.T) {
	or, ow, err := os.Pipe()
	require.NoError(t, err)
	defer or.Close()
	_, _ = unix.FcntlInt(ow.Fd(), unix.F_SETPIPE_SZ, childPipeSize)
	size, err := unix.FcntlInt(ow.Fd(), unix.F_GETPIPE_SZ, 0)
	require.NoError(t, err)
	data := bytes.Repeat([]byte("0123456789abcde\n"), size/16/4) // a quarter of what the output holds
	tp := newTap(func(Stream, []byte) {}, nil, nil, nil)
	tp.budget = newTapBudget(1, 0) // everything is skimmed
	r, w, err := os.Pipe()
	require.NoError(t, err)
	go func() { defer w.Close(); writeChunks(w, data, relayBufSize) }()
	done := make(chan struct{})
	go func() { defer close(done); relay(r, ow, Stdout, tp) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the relay did not see the end of the child's output")
	}
	st := tp.close()
	ow.Close()
	got, err := io.ReadAll(or)
	require.NoError(t, err)
	require.True(t, bytes.Equal(data, got), "%d of %d bytes", len(got), len(data))
	assert.Positive(t, st.Unread)
	assert.Less(t, st.Unread, int64(len(data)), "the end of each skimmed stretch is read")
}

// TestSkimLeavesWhatFollowsAPause: what the child writes after a burst
// the tap could not afford reaches it whole, the failure at its end
// included: a line written at once after the burst because a skim leaves
// the end of what the pipe holds to a read (the tap, having read the end
// of the stretch skimmed before it, knows where a line starts), a long
// write after a pause because a skim that waited for the child lets the
// tap take the next read whatever it owes.
func TestSkimLeavesWhatFollowsAPause(t *testing.T) {
	data, _ := burst(50_000, 100)
	const failure = "rank 3: RuntimeError: NCCL error: unhandled system error"
	warns, n := burst(1_500, 1) // ~150 KiB of WARN lines: more than a skim leaves to a read
	for _, tc := range []struct {
		name   string
		after  string
		pause  time.Duration // the tap's; the test writes after at the relay's first wait past the burst
		paused bool
	}{
		{"a line at once", failure + "\n", time.Hour, false},
		{"a long write after a pause", string(warns) + failure + "\n", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var got []string
			tp := newTap(func(_ Stream, l []byte) { mu.Lock(); got = append(got, string(l)); mu.Unlock() }, infoNoise, infoNoiseLines, nil)
			tp.drainTime = time.Hour
			tp.budget = newTapBudget(1, 0) // the tap owes from the start: the burst is skimmed
			tp.pause = tc.pause
			r, w, err := os.Pipe()
			require.NoError(t, err)
			growPipe(r)
			var out bytes.Buffer
			if tc.paused {
				var once sync.Once
				tp.skimWaiting = func() {
					// On the relay's goroutine: once all of the burst
					// went out, the relay waits for the child, which
					// writes the rest now.
					if out.Len() == len(data) {
						once.Do(func() { go func() { _, _ = w.Write([]byte(tc.after)); w.Close() }() })
					}
				}
			}
			go func() {
				writeChunks(w, data, relayBufSize)
				if !tc.paused {
					_, _ = w.Write([]byte(tc.after))
					w.Close()
				}
			}()
			relay(r, &out, Stdout, tp)
			st := tp.close()
			require.Equal(t, string(data)+tc.after, out.String())
			require.NotEmpty(t, got, "%+v", st)
			assert.Equal(t, failure, got[len(got)-1], "the failure line reached the tap whole (%+v)", st)
			if tc.paused {
				require.GreaterOrEqual(t, len(got), n+1)
				want := strings.Split(strings.TrimSuffix(tc.after, "\n"), "\n")
				assert.Equal(t, want, got[len(got)-len(want):], "all of what followed the pause")
			}
			assert.Positive(t, st.Unread)
			assert.Zero(t, st.Lost)
		})
	}
}

// TestSkimReturnsAfterAWait: a skim that had to wait for the child
// returns as soon as the child writes, with nothing moved and the time it
// waited, so that its caller asks the tap's budget again; the next skim
// moves what is there but its end, which it leaves to a read.
func TestSkimReturnsAfterAWait(t *testing.T) {
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	defer w.Close()
	data, _ := burst(500, 10) // ~45 KiB: more than a skim leaves
	var out bytes.Buffer
	k := newSkimmer(r, &out)
	require.NotNil(t, k)
	k.waiting = func() { go func() { _, _ = w.Write(data) }() }
	n, waited, werr, rerr := k.skim(true)
	require.NoError(t, werr)
	require.NoError(t, rerr)
	assert.Zero(t, n)
	assert.Positive(t, waited)
	assert.Zero(t, out.Len(), "nothing moved")
	k.waiting = nil
	// The write may still be on its way into the pipe.
	for {
		a, err := unix.IoctlGetInt(int(r.Fd()), unix.TIOCINQ)
		require.NoError(t, err)
		if a == len(data) {
			break
		}
		runtime.Gosched()
	}
	n, waited, werr, rerr = k.skim(true)
	require.NoError(t, werr)
	require.NoError(t, rerr)
	assert.Zero(t, waited)
	require.Positive(t, n)
	assert.Equal(t, data[:n], out.Bytes())
	rest := make([]byte, len(data))
	m, err := r.Read(rest)
	require.NoError(t, err)
	assert.Equal(t, data[n:], rest[:m], "the end is left in the pipe, for the read")
	assert.GreaterOrEqual(t, m, skimTail)
}

// TestSkimmerOnlyForPipes: a pty or a file is read by the tap whole.
func TestSkimmerOnlyForPipes(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	require.NoError(t, err)
	defer f.Close()
	assert.Nil(t, newSkimmer(f, io.Discard))
	p, err := openPTY(nil)
	if err == nil {
		defer p.master.Close()
		defer p.slave.Close()
		assert.Nil(t, newSkimmer(p.master, io.Discard))
	}
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	defer w.Close()
	assert.NotNil(t, newSkimmer(r, io.Discard))
}
