package main

import (
	"bytes"
	"io"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ncclrun/ncclrun/diagnosis"
)

func TestGenerateExactSizeHealthyLines(t *testing.T) {
	for _, size := range []int64{1, 2, 100, 1 << 20} {
		var b bytes.Buffer
		require.NoError(t, Generate(&b, size))
		assert.EqualValues(t, size, b.Len(), "size %d", size)
		assert.Equal(t, byte('\n'), b.Bytes()[b.Len()-1], "size %d ends a line", size)
	}
	var b bytes.Buffer
	require.NoError(t, Generate(&b, 1<<20))
	for _, l := range bytes.Split(bytes.TrimSuffix(b.Bytes(), []byte("\n")), []byte("\n"))[:1000] {
		pl := diagnosis.ParseLine(l)
		require.Equal(t, "INFO", pl.Level, "%q", l)
		require.NotZero(t, pl.PID, "%q", l)
	}
	ds, err := diagnosis.Explain(bytes.NewReader(b.Bytes()), diagnosis.Facts{})
	require.NoError(t, err)
	assert.Empty(t, ds, "a healthy log must not be diagnosed")
}

func TestWriteRankOneWritePerLine(t *testing.T) {
	var w countingWriter
	require.NoError(t, WriteRank(&w, 9, 64, 10000))
	assert.GreaterOrEqual(t, w.n, 10000)
	assert.Equal(t, w.writes, bytes.Count(w.buf.Bytes(), []byte("\n")))
	for _, l := range bytes.Split(bytes.TrimSuffix(w.buf.Bytes(), []byte("\n")), []byte("\n")) {
		require.True(t, bytes.HasPrefix(l, []byte("gpu-node-01:31009:")), "%q", l)
	}
}

type countingWriter struct {
	buf       bytes.Buffer
	n, writes int
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.writes++
	c.n += len(p)
	return c.buf.Write(p)
}

func TestLongLineHasNoNewline(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, LongLine(&b, 200000))
	assert.Equal(t, 200000, b.Len())
	assert.NotContains(t, b.String(), "\n")
}

func TestSummarize(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var d []time.Duration
		for _, x := range v {
			d = append(d, time.Duration(x)*time.Millisecond)
		}
		return d
	}
	assert.Equal(t, Stats{}, Summarize(nil))
	in := ms(5, 1, 3)
	assert.Equal(t, Stats{Min: ms(1)[0], Median: ms(3)[0], P99: ms(5)[0], Max: ms(5)[0]}, Summarize(in))
	assert.Equal(t, ms(5, 1, 3), in, "input untouched")
	assert.Equal(t, 2500*time.Microsecond, Summarize(ms(4, 1, 2, 3)).Median)
	var hundred []time.Duration
	for i := 100; i >= 1; i-- {
		hundred = append(hundred, time.Duration(i))
	}
	assert.Equal(t, time.Duration(99), Summarize(hundred).P99)
}

// TestRoundTripsThroughEcho runs the latency protocol against echoPartial
// over real pipes, in-process.
func TestRoundTripsThroughEcho(t *testing.T) {
	inR, inW, err := os.Pipe()
	require.NoError(t, err)
	outR, outW, err := os.Pipe()
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- echoPartial(inR, outW); outW.Close() }()
	ds, err := roundTrips(inW, outR, 10)
	require.NoError(t, err)
	assert.Len(t, ds, 10)
	inW.Close()
	require.NoError(t, <-done)
	rest, _ := io.ReadAll(outR)
	assert.Empty(t, rest)
}

func TestGenerateMixedCountsWarnLines(t *testing.T) {
	for _, tc := range []struct {
		every, procs int
	}{{100, 0}, {1, 0}, {1, 50000}} {
		var b bytes.Buffer
		warns, lines, err := GenerateMixed(&b, 1<<20, tc.every, tc.procs)
		require.NoError(t, err)
		assert.EqualValues(t, 1<<20, b.Len())
		assert.EqualValues(t, bytes.Count(b.Bytes(), []byte("\n")), lines)
		assert.EqualValues(t, bytes.Count(b.Bytes(), []byte(" NCCL WARN ")), warns)
		if tc.every == 1 {
			assert.Equal(t, lines, warns)
		}
	}
}
