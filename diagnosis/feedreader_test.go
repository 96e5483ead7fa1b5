package diagnosis

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"
)

// TestFeedReaderSameAsLines: FeedReader's chunk scan leaves a matcher in
// the state that feeding every line leaves it in (feedLineByLine): the
// same diagnoses and the same line count, over every testdata log (also
// read a byte or half a buffer at a time, and with a healthy burst
// first), and over lines around MaxLine, without a final newline, with
// CRs, and with a read error.
func TestFeedReaderSameAsLines(t *testing.T) {
	inputs := map[string][]byte{}
	for _, in := range logsAndBursts(t) {
		inputs[in.name] = in.b
	}
	healthy, _ := perfLines(t)
	warn := "host:1:2 [0] misc/ibvwrap.cc:190 NCCL WARN Call to ibv_reg_mr failed with error Cannot allocate memory"
	long := func(n int, tail string) string { return strings.Repeat("x", n) + tail }
	for name, s := range map[string]string{
		"empty":                      "",
		"no final newline":           "a\n" + warn,
		"crlf":                       warn + "\r\n" + warn + "\r\n",
		"literal past MaxLine":       long(MaxLine, warn) + "\n" + "b\n",
		"literal inside MaxLine":     long(MaxLine-len(warn)-1, " "+warn) + "\n",
		"literal across MaxLine":     long(MaxLine-20, " "+warn) + "\n",
		"line of MaxLine-1":          long(MaxLine-1, "") + "\n" + warn + "\n",
		"line of MaxLine":            long(MaxLine, "") + "\n" + warn + "\n",
		"line of MaxLine+1":          long(MaxLine+1, "") + "\n" + warn + "\n",
		"line of 3 chunks":           long(3*feedChunk, warn) + "\n" + warn,
		"long last line":             "a\n" + long(MaxLine+5, warn),
		"warn then a chunk of noise": warn + "\n" + strings.Repeat(string(healthy[0])+"\n", feedChunk/len(healthy[0])+3) + warn,
		"summary":                    "Root Cause (first observed failure):\n[0]:\n  time      : 2024\n  host      : node-a\n  rank      : 0\n  exitcode  : 1 (pid: 12)\n" + warn + "\n",
	} {
		inputs[name] = []byte(s)
	}
	readers := map[string]func([]byte) io.Reader{
		"whole": func(b []byte) io.Reader { return bytes.NewReader(b) },
		"half":  func(b []byte) io.Reader { return iotest.HalfReader(bytes.NewReader(b)) },
		"byte": func(b []byte) io.Reader {
			if len(b) > 1<<16 {
				return iotest.HalfReader(bytes.NewReader(b))
			}
			return iotest.OneByteReader(bytes.NewReader(b))
		},
		"eof with data": func(b []byte) io.Reader { return iotest.DataErrReader(bytes.NewReader(b)) },
	}
	for name, b := range inputs {
		ref := NewMatcher(Facts{})
		require.NoError(t, feedLineByLine(ref, bytes.NewReader(b)))
		for rn, mk := range readers {
			if raceEnabled && rn != "whole" {
				continue
			}
			for _, workers := range []int{1, 2, 3} {
				m := NewMatcher(Facts{})
				require.NoError(t, feedChunks(m, mk(b), workers), "%s (%s, %d workers)", name, rn, workers)
				require.Equal(t, ref.Diagnoses(), m.Diagnoses(), "%s (%s, %d workers)", name, rn, workers)
				require.Equal(t, ref.lineNo, m.lineNo, "%s (%s, %d workers): lines", name, rn, workers)
			}
		}
	}
	// A read error: the lines before it are fed, the error is returned.
	boom := errors.New("boom")
	for _, workers := range []int{1, 2} {
		m := NewMatcher(Facts{})
		err := feedChunks(m, io.MultiReader(strings.NewReader(warn+"\n"), iotest.ErrReader(boom)), workers)
		require.ErrorIs(t, err, boom)
		require.Len(t, m.Diagnoses(), 1)
	}
}

// namedLog is a test input and its name.
type namedLog struct {
	name string
	b    []byte
}

// logsAndBursts is every testdata log, alone and after a burst of healthy
// INFO lines (the matcher's markers seen, its filter narrowed), in order.
func logsAndBursts(t *testing.T) []namedLog {
	t.Helper()
	logs, err := filepath.Glob("testdata/*/*.log")
	require.NoError(t, err)
	require.Greater(t, len(logs), 100)
	healthy, _ := perfLines(t)
	burst := append(bytes.Join(healthy, []byte("\n")), '\n')
	var out []namedLog
	for _, p := range logs {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		out = append(out, namedLog{p, b}, namedLog{p + " after a burst", append(append([]byte(nil), burst...), b...)})
	}
	return out
}

type zeroReader struct{}

func (zeroReader) Read([]byte) (int, error) { return 0, nil }

// TestFeedReaderNoProgress: a reader that returns nothing for ever is an
// error (io.ErrNoProgress, as with bufio), not a loop, and the lines read
// before count.
func TestFeedReaderNoProgress(t *testing.T) {
	warn := "host:1:2 [0] misc/ibvwrap.cc:190 NCCL WARN Call to ibv_reg_mr failed with error Cannot allocate memory\n"
	for _, workers := range []int{1, 2} {
		m := NewMatcher(Facts{})
		err := feedChunks(m, io.MultiReader(strings.NewReader(warn), zeroReader{}), workers)
		require.ErrorIs(t, err, io.ErrNoProgress)
		require.Len(t, m.Diagnoses(), 1)
	}
}
