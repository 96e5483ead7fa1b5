package diagnosis

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ncclrun/ncclrun/internal/shown"
)

// tqdmWarn is an NCCL WARN line written right after a progress bar's
// redraws of n steps, with no newline between them (2>&1 into a log).
func tqdmWarn(n int) []byte {
	var b bytes.Buffer
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "\r 10%%|####      | %d/5000", i)
	}
	b.WriteString("node-a:1234:1300 [0] transport/shm.cc:589 NCCL WARN Error while creating shared memory segment /dev/shm/nccl-abc (size 9637888), error: No space left on device (28)\n")
	return b.Bytes()
}

// TestTqdmRedrawsBeforeWarn: a WARN line after a progress bar's redraws is
// diagnosed, its host read without the bar's total, whether the physical
// line is shorter than MaxLine or longer (a terminal shows the text after
// the last '\r'), through FeedAll, FeedReader (explain) and FeedChunk.
func TestTqdmRedrawsBeforeWarn(t *testing.T) {
	for _, n := range []int{1, 2400, 2600, 20000} {
		line := tqdmWarn(n)
		check := func(t *testing.T, ds []Diagnosis) {
			t.Helper()
			require.NotEmpty(t, ds, "%d bytes", len(line))
			require.Equal(t, "shm", ds[0].ID)
			require.Equal(t, []string{"node-a"}, ds[0].Hosts)
		}
		t.Run(fmt.Sprintf("FeedAll/%d", n), func(t *testing.T) {
			m := NewMatcher(Facts{})
			m.FeedAll(line)
			check(t, m.Diagnoses())
		})
		t.Run(fmt.Sprintf("FeedReader/%d", n), func(t *testing.T) {
			for _, nofilter := range []bool{false, true} {
				for _, workers := range []int{1, 3} {
					m := NewMatcher(Facts{})
					m.nofilter = nofilter
					var err error
					if nofilter {
						err = FeedReader(m, bytes.NewReader(line))
					} else {
						err = feedChunks(m, &smallReads{b: line, n: 5000}, workers)
					}
					require.NoError(t, err)
					check(t, m.Diagnoses())
				}
			}
		})
		t.Run(fmt.Sprintf("FeedReader at EOF/%d", n), func(t *testing.T) {
			m := NewMatcher(Facts{})
			require.NoError(t, FeedReader(m, bytes.NewReader(bytes.TrimSuffix(line, []byte("\n")))))
			check(t, m.Diagnoses())
		})
		t.Run(fmt.Sprintf("FeedChunk/%d", n), func(t *testing.T) {
			m := NewMatcher(Facts{})
			var found []Diagnosis
			m.FeedChunk(append([]byte("a\n"), line...), Noise, func(ds []Diagnosis) { found = append(found, ds...) })
			check(t, found)
			check(t, m.Diagnoses())
		})
	}
}

// smallReads returns b n bytes a read.
type smallReads struct {
	b []byte
	n int
}

func (r *smallReads) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	k := copy(p[:min(len(p), r.n)], r.b)
	r.b = r.b[k:]
	return k, nil
}

// TestShownPart: a line over MaxLine is cut from its last '\r' (not one
// of its ending), '\r' kept, to MaxLine bytes; a shorter line is left
// alone; reading it a piece at a time (shown.Line) keeps the same text.
func TestShownPart(t *testing.T) {
	long := strings.Repeat("l", MaxLine+5)
	for _, tc := range []struct{ in, want string }{
		{"a\rb\n", "a\rb\n"},
		{long + "\n", long[:MaxLine]},
		{"x\r" + long + "\n", "\r" + long[:MaxLine-1]},
		{long + "\rtail\n", "\rtail\n"},
		{long + "\rtail\r\n", "\rtail\r\n"},
		{long + "\rtail\r\r", "\rtail\r\r"},
		{long + "\r\rtail", "\rtail"},
		{long + "\r\r\n", long[:MaxLine]},
	} {
		got, _ := shownPart([]byte(tc.in))
		require.Equal(t, tc.want, string(got))
		if len(tc.in) <= MaxLine {
			continue
		}
		for _, step := range []int{1, 7, MaxLine} {
			l := shown.Line{Max: MaxLine}
			in := strings.TrimSuffix(tc.in, "\n")
			for p := in; len(p) > 0; p = p[min(step, len(p)):] {
				l.Add([]byte(p[:min(step, len(p))]))
			}
			require.Equal(t, string(trimEOL([]byte(tc.want))), string(trimEOL(l.Buf)), "step %d", step)
		}
	}
}

// TestBarTotalNotHost: digits of a bar's "n/total" glued to NCCL's host
// after a '\r' redraw are not the host's; elsewhere they are.
func TestBarTotalNotHost(t *testing.T) {
	for _, tc := range []struct{ line, host string }{
		{"\r 10%| 2/5000node-a:1:2 [0] NCCL WARN x", "node-a"},
		{"\r 1/5\r 10%| 2/5000node-a:1:2 [0] NCCL WARN x", "node-a"},
		{" 10%| 2/5000node-a:1:2 [0] NCCL WARN x", "5000node-a"},
		{"\r 10%| 2/5000:1:2 [0] NCCL WARN x", "5000"},
		{"\r 10%| x/5000node-a:1:2 [0] NCCL WARN x", "5000node-a"},
		{"\r 10%| 2/50-a:1:2 [0] NCCL WARN x", "50-a"},
	} {
		l := ParseLine([]byte(tc.line))
		require.Equal(t, tc.host, l.Host, "%q", tc.line)
		require.Equal(t, tc.host, tc.line[l.Start:l.Start+len(tc.host)], "%q", tc.line)
	}
}
