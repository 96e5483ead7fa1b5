package nccllog

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLineGate: a given-back line is written at once; inside CMD's line
// (unfinished, or a progress bar's \r) it starts a line of its own, and
// CMD's bytes are all there, in order.
func TestLineGate(t *testing.T) {
	var b bytes.Buffer
	g := &Gate{w: &b}
	g.emit([]byte("W1"))
	_, _ = g.Write([]byte("loss 0.5"))
	g.emit([]byte("W2"))
	assert.Equal(t, "W1\nloss 0.5\nW2\n", b.String(), "CMD is inside a line: W2 starts a new one")
	_, _ = g.Write([]byte("1\nstep"))
	_, _ = g.Write([]byte(" 2\n"))
	g.emit([]byte("W3"))
	assert.Equal(t, "W1\nloss 0.5\nW2\n1\nstep 2\nW3\n", b.String(), "after CMD's newline: no newline added")
	_, _ = g.Write([]byte("10%\r"))
	g.emit([]byte("W4"))
	_, _ = g.Write([]byte("20%\r"))
	assert.Equal(t, "W1\nloss 0.5\nW2\n1\nstep 2\nW3\n10%\r\nW4\n20%\r", b.String(), "after a \\r line: a new line")
}

func TestProbeReadsFilesAndGivesBackWarn(t *testing.T) {
	var out bytes.Buffer
	p, err := NewProbe(&out, -1, -1)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(p.Dir, "nccl.%h.%p"), p.DebugFile())
	fi, err := os.Stat(p.Dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), "private directory")

	var fed []string
	p.feed = func(chunk []byte) {
		require.Equal(t, byte('\n'), chunk[len(chunk)-1], "whole lines")
		fed = append(fed, strings.Split(string(chunk[:len(chunk)-1]), "\n")...)
	}
	f1 := filepath.Join(p.Dir, "nccl.n1.101")
	require.NoError(t, os.WriteFile(f1, []byte("n1:101:101 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\nn1:101:150 [0] NCCL INFO NET/IB : No dev"), 0o600))
	p.poll(false)
	assert.Equal(t, []string{"n1:101:101 [0] NCCL INFO NCCL version 2.21.5+cuda12.4"}, fed, "a partial line waits")
	appendFile(t, f1, "ice found.\nn1:101:150 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.0.2<5000> failed : Connection refused\n")
	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(p.Dir, "nccl.n1.666")))
	require.NoError(t, os.WriteFile(filepath.Join(p.Dir, "other"), []byte("x NCCL WARN not ours\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(p.Dir, "nccl.n1.102"), []byte("n1:102:102 [1] NCCL INFO Using network Socket"), 0o600))
	p.poll(false)
	p.Finish()
	sort.Strings(fed)
	assert.Equal(t, []string{
		"n1:101:101 [0] NCCL INFO NCCL version 2.21.5+cuda12.4",
		"n1:101:150 [0] NCCL INFO NET/IB : No device found.",
		"n1:101:150 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.0.2<5000> failed : Connection refused",
		"n1:102:102 [1] NCCL INFO Using network Socket",
	}, fed, "every line of NCCL's files, the last one without its newline too; no link, no other file")
	assert.Equal(t, "NCCL version 2.21.5+cuda12.4\n"+
		"n1:101:150 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.0.2<5000> failed : Connection refused\n",
		out.String(), "what NCCL prints at WARN: the version banner and the WARN lines")
	_, err = os.Stat(p.Dir)
	assert.ErrorIs(t, err, fs.ErrNotExist, "Finish removes the directory")
}

// The probe's directory is CMD's (its user's under --user): the probe
// follows at most maxProbeFiles files, each holding an open descriptor,
// and looks at at most maxProbeEntries names a poll, whatever CMD puts
// there.
func TestProbeFollowsBoundedFiles(t *testing.T) {
	for _, tc := range []struct {
		name                     string
		files, maxFiles, entries int
		want                     int
	}{
		{"files", 6, 3, 100, 3},
		{"entries", 6, 100, 2, 2},
		{"within both", 2, 3, 100, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			oldFiles, oldEntries := maxProbeFiles, maxProbeEntries
			maxProbeFiles, maxProbeEntries = tc.maxFiles, tc.entries
			t.Cleanup(func() { maxProbeFiles, maxProbeEntries = oldFiles, oldEntries })
			p, err := NewProbe(io.Discard, -1, -1)
			require.NoError(t, err)
			t.Cleanup(p.Remove)
			lines := 0
			p.feed = func(chunk []byte) { lines += bytes.Count(chunk, []byte("\n")) }
			for i := range tc.files {
				require.NoError(t, os.WriteFile(filepath.Join(p.Dir, fmt.Sprintf("nccl.n1.%d", 100+i)), []byte("n1:1:1 [0] NCCL INFO x\n"), 0o600))
			}
			p.poll(true)
			assert.Len(t, p.files, tc.want)
			assert.Equal(t, tc.want, lines)
		})
	}
}

func appendFile(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(s)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

// TestProbeFollowerAndFinish: the follower goroutine and finish hand every
// line over once, whatever the timing (run with -race).
func TestProbeFollowerAndFinish(t *testing.T) {
	var out bytes.Buffer
	p, err := NewProbe(&out, -1, -1)
	require.NoError(t, err)
	var mu sync.Mutex
	n := 0
	p.Start(func(chunk []byte) { mu.Lock(); n += bytes.Count(chunk, []byte("\n")); mu.Unlock() })
	f := filepath.Join(p.Dir, "nccl.n1.7")
	require.NoError(t, os.WriteFile(f, nil, 0o600))
	for i := 0; i < 200; i++ {
		appendFile(t, f, "n1:7:7 [0] NCCL INFO line\n")
	}
	appendFile(t, f, "n1:7:7 [0] x.cc:1 NCCL WARN last")
	p.Finish()
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, 201, n)
	assert.Equal(t, "n1:7:7 [0] x.cc:1 NCCL WARN last\n", out.String())
}

// TestProbeCutsLongLines: a line over MaxLine in a debug file, whole or
// still being written, reaches the feed cut at MaxLine, its rest dropped
// and never read as a line of its own; the partial line it holds stays
// within MaxLine however long the line grows.
func TestProbeCutsLongLines(t *testing.T) {
	p, err := NewProbe(io.Discard, -1, -1)
	require.NoError(t, err)
	defer p.Finish()
	var fed []string
	p.feed = func(chunk []byte) {
		require.Equal(t, byte('\n'), chunk[len(chunk)-1], "whole lines")
		fed = append(fed, strings.Split(string(chunk[:len(chunk)-1]), "\n")...)
	}
	f := filepath.Join(p.Dir, "nccl.n1.101")
	long := strings.Repeat("x", 3*MaxLine)
	require.NoError(t, os.WriteFile(f, []byte("a\n"+long), 0o600))
	p.poll(false)
	for _, pf := range p.files {
		assert.LessOrEqual(t, len(pf.partial), MaxLine, "the line in progress is held up to MaxLine only")
	}
	appendFile(t, f, "x WARN rest of the long line\nb\n"+long+"\nc\n")
	p.poll(false)
	assert.Equal(t, []string{"a", long[:MaxLine], "b", long[:MaxLine], "c"}, fed)
}

// readUntil reads r until what it read contains want, and returns it; it
// fails the test when want has not come within the deadline.
func readUntil(t *testing.T, r io.Reader, want string, deadline time.Duration) string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		var b []byte
		buf := make([]byte, 4096)
		for {
			n, err := r.Read(buf)
			b = append(b, buf[:n]...)
			if bytes.Contains(b, []byte(want)) || err != nil {
				got <- string(b)
				return
			}
		}
	}()
	select {
	case s := <-got:
		require.Contains(t, s, want)
		return s
	case <-time.After(deadline):
		t.Fatalf("%q did not reach stdout within %v", want, deadline)
		return ""
	}
}

// TestProbeWarnNeverWaits: while CMD's stdout holds an unfinished line (a
// progress bar's \r, then nothing more), a WARN NCCL writes to its debug
// file reaches stdout at once, on a line of its own, after CMD's bytes.
func TestProbeWarnNeverWaits(t *testing.T) {
	for _, cmdOut := range []string{"epoch 1: 10%|#         |\r", "loss 0.5"} {
		t.Run(strings.TrimSpace(cmdOut), func(t *testing.T) {
			pr, pw, err := os.Pipe()
			require.NoError(t, err)
			defer pr.Close()
			defer pw.Close()
			p, err := NewProbe(pw, -1, -1)
			require.NoError(t, err)
			p.Start(nil)
			defer p.Finish()
			_, err = p.Gate().Write([]byte(cmdOut))
			require.NoError(t, err)
			warn := "n1:101:150 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.0.2<5000> failed : Connection refused"
			require.NoError(t, os.WriteFile(filepath.Join(p.Dir, "nccl.n1.101"), []byte("\n"+warn+"\n"), 0o600))
			got := readUntil(t, pr, warn+"\n", 5*time.Second)
			assert.Equal(t, cmdOut+"\n"+warn+"\n", got)
		})
	}
}

// BenchmarkProbeWarnLatency measures how long a WARN line written to a
// debug file takes to reach stdout through the probe (docs/diagnosis.md
// quotes the figures): go test -run - -bench ProbeWarnLatency -benchtime 200x ./nccllog/
func BenchmarkProbeWarnLatency(b *testing.B) {
	pr, pw, err := os.Pipe()
	require.NoError(b, err)
	defer pr.Close()
	defer pw.Close()
	p, err := NewProbe(pw, -1, -1)
	require.NoError(b, err)
	p.Start(nil)
	defer p.Finish()
	f, err := os.OpenFile(filepath.Join(p.Dir, "nccl.n1.101"), os.O_CREATE|os.O_WRONLY, 0o600)
	require.NoError(b, err)
	defer f.Close()
	var lat []time.Duration
	buf := make([]byte, 4096)
	for i := 0; b.Loop(); i++ {
		line := fmt.Sprintf("n1:101:150 [0] misc/socket.cc:484 NCCL WARN probe latency %d\n", i)
		start := time.Now()
		_, err := f.WriteString("\n" + line)
		require.NoError(b, err)
		var got []byte
		for !bytes.HasSuffix(got, []byte(line)) {
			n, err := pr.Read(buf)
			require.NoError(b, err)
			got = append(got, buf[:n]...)
		}
		lat = append(lat, time.Since(start))
	}
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
	b.ReportMetric(ms(lat[len(lat)*99/100]), "p99-ms")
	b.ReportMetric(ms(lat[len(lat)-1]), "max-ms")
}
