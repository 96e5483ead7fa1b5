//go:build linux

package launcher

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
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
			func(b *tapBudget) bool { return b.allows(t0.Add(10*time.Millisecond), 0) },
		}, []bool{true, false, true}},
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
		{"pipe", func(t *testing.T) (io.Writer, func() []byte) {
			r, w, err := os.Pipe()
			require.NoError(t, err)
			var got bytes.Buffer
			done := make(chan struct{})
			go func() { defer close(done); _, _ = io.Copy(&got, r); r.Close() }()
			return w, func() []byte { w.Close(); <-done; return got.Bytes() }
		}, false},
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
				go func() {
					defer w.Close()
					for p := data; len(p) > 0; p = p[min(len(p), relayBufSize):] {
						if _, err := w.Write(p[:min(len(p), relayBufSize)]); err != nil {
							return
						}
					}
				}()
				var errs []error
				relayNotify(r, out, Stdout, tp, func(_ Stream, err error) { errs = append(errs, err) })
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
// relay's output (the last byte of the child's pipe, which a skim leaves
// for the next read, and the pipe's end are seen without more data to
// wake the relay): the relay returns, and the bytes are all there for the
// reader that comes later.
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
	go func() {
		defer w.Close()
		for p := data; len(p) > 0; p = p[min(len(p), relayBufSize):] {
			_, _ = w.Write(p[:min(len(p), relayBufSize)])
		}
	}()
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
	assert.Equal(t, int64(len(data)), st.Unread)
}

// TestSkimLeavesWhatFollowsAPause: a skim that waited for the child
// (the burst is over) hands what the child writes next to the tap,
// whatever the tap owes, and the line the skimmed stretch ended before
// reaches it whole.
func TestSkimLeavesWhatFollowsAPause(t *testing.T) {
	data, _ := burst(50_000, 100)
	const last = "rank 3: RuntimeError: NCCL error: unhandled system error"
	var mu sync.Mutex
	var got []string
	tp := newTap(func(_ Stream, l []byte) { mu.Lock(); got = append(got, string(l)); mu.Unlock() }, nil, nil, nil)
	tp.drainTime = time.Hour
	tp.budget = newTapBudget(1, 0) // the tap owes from the start: all of the burst is skimmed
	tp.pause = 0                   // any wait for the child is a pause
	r, w, err := os.Pipe()
	require.NoError(t, err)
	burstDone := make(chan struct{})
	var once sync.Once
	tp.skimWaiting = func() {
		// The relay moved all it could of the burst and waits for the
		// child: the child writes its last line now.
		select {
		case <-burstDone:
			once.Do(func() {
				go func() { _, _ = w.Write([]byte(last + "\n")); w.Close() }()
			})
		default:
		}
	}
	go func() {
		for p := data; len(p) > 0; p = p[min(len(p), relayBufSize):] {
			_, _ = w.Write(p[:min(len(p), relayBufSize)])
		}
		close(burstDone)
	}()
	var out bytes.Buffer
	relay(r, &out, Stdout, tp)
	st := tp.close()
	require.Equal(t, string(data)+last+"\n", out.String())
	require.NotEmpty(t, got, "%+v", st)
	assert.Equal(t, last, got[len(got)-1], "the line after the pause reached the tap (%+v)", st)
	assert.Positive(t, st.Unread)
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
