//go:build linux

package launcher

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// benchChunk is what the benchmark's writer hands to the pipe per write.
const benchChunk = 64 << 10

// ncclBlock returns about size bytes of NCCL INFO lines of a 2x8 job.
func ncclBlock(size int) []byte {
	var b []byte
	for i := 0; len(b) < size; i++ {
		r := i % 16
		b = fmt.Appendf(b, "gpu-node-%02d:%d:%d [%d] NCCL INFO Channel %02d/0 : %d[%d] -> %d[%d] via P2P/CUMEM/read\n",
			r/8, 31000+r, 31000+r, r%8, i%32, r, r%8, (r+1)%16, (r+1)%8)
	}
	return b[:size]
}

// feedPipe writes n chunks of block (cycled) to a new pipe from a
// goroutine and returns the read end; the write end is closed after the
// last chunk.
func feedPipe(b *testing.B, block []byte, n int) *os.File {
	b.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	go func() {
		defer w.Close()
		off := 0
		for i := 0; i < n; i++ {
			if off+benchChunk > len(block) {
				off = 0
			}
			if _, err := w.Write(block[off : off+benchChunk]); err != nil {
				return
			}
			off += benchChunk
		}
	}()
	return r
}

// drainPipe returns the write end of a pipe whose read end a goroutine
// drains; wait closes the write end and waits for the drain.
func drainPipe(b *testing.B) (w *os.File, wait func()) {
	b.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(io.Discard, r)
		r.Close()
	}()
	return w, func() { w.Close(); <-done }
}

// BenchmarkRelay measures relay alone (a pipe in, io.Discard or a pipe
// out), without and with the tap; MB/s is relayed bytes. The tap variants
// count the lines shed and lost per op, which is how far the tap fell
// behind.
func BenchmarkRelay(b *testing.B) {
	block := ncclBlock(4 << 20)
	lines := 0
	noop := lineTap{line: func(Stream, []byte) { lines++ }, noise: infoNoise}
	for _, tc := range []struct {
		name   string
		tap    Tap
		toPipe bool
	}{
		{"discard/no-tap", nil, false},
		{"discard/tap-noop", noop, false},
		{"pipe/no-tap", nil, true},
		{"pipe/tap-noop", noop, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var out io.Writer = io.Discard
			wait := func() {}
			if tc.toPipe {
				out, wait = drainPipe(b)
			}
			var t *tap
			if tc.tap != nil {
				t = newTap(tc.tap)
			}
			b.SetBytes(benchChunk)
			b.ResetTimer()
			relay(feedPipe(b, block, b.N), out, Stdout, t, nil)
			var shed, lost int64
			if t != nil {
				shed, lost = t.close()
			}
			wait()
			b.StopTimer()
			b.ReportMetric(float64(shed)/float64(b.N), "shed/op")
			b.ReportMetric(float64(lost)/float64(b.N), "lost/op")
		})
	}
}

// BenchmarkRunCat runs /bin/cat of a 64 MiB file of NCCL lines under Run
// with the output on a pipe, as `ncclrun run -- cat FILE | cat` does
// (MB/s is the file's bytes per second), with and without a tap.
func BenchmarkRunCat(b *testing.B) {
	cat, err := exec.LookPath("cat")
	if err != nil {
		b.Skip("no cat")
	}
	file := filepath.Join(b.TempDir(), "nccl.log")
	data := ncclBlock(64 << 20)
	if err := os.WriteFile(file, data, 0o600); err != nil {
		b.Fatal(err)
	}
	for _, tap := range []bool{false, true} {
		b.Run(fmt.Sprintf("tap=%v", tap), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			var shed int64
			for i := 0; i < b.N; i++ {
				out, wait := drainPipe(b)
				cfg := Config{Path: cat, Args: []string{file}, Stdout: out, Stderr: io.Discard, NoPTY: true}
				if tap {
					cfg.Tap = lineTap{line: func(Stream, []byte) {}, noise: infoNoise}
				}
				res, err := Run(cfg)
				wait()
				if err != nil || res.ExitCode != 0 {
					b.Fatalf("Run: %v, exit %d", err, res.ExitCode)
				}
				shed += res.TapShed
			}
			b.ReportMetric(float64(shed)/float64(b.N), "shed/op")
		})
	}
}

// BenchmarkRunTrue is Run's own start-up and shut-down cost: /bin/true
// supervised, output on pipes, with the tap on as ncclrun run has it.
func BenchmarkRunTrue(b *testing.B) {
	tr, err := exec.LookPath("true")
	if err != nil {
		b.Skip("no true")
	}
	for i := 0; i < b.N; i++ {
		res, err := Run(Config{Path: tr, Stdout: io.Discard, Stderr: io.Discard, NoPTY: true, Tap: lineTap{line: func(Stream, []byte) {}}})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("Run: %v, exit %d", err, res.ExitCode)
		}
	}
}

// BenchmarkTapBurst relays a burst of NCCL INFO lines with a WARN line
// every 100 (MB/s is relayed bytes) through a tap that
// costs about what the matcher does on a line (it sums the line's bytes
// four times): shed/op and lost/op say what the tap shed and lost per
// 64 KiB, warn-missed how many WARN lines of the whole burst did not reach
// the tap (it must never miss one).
func BenchmarkTapBurst(b *testing.B) {
	block, warns := burst(40_000, 100)
	sum := 0
	seen := 0
	fn := func(_ Stream, line []byte) {
		for k := 0; k < 4; k++ {
			for _, c := range line {
				sum += int(c)
			}
		}
		if bytes.Contains(line, []byte(" NCCL WARN ")) {
			seen++
		}
	}
	for _, shed := range []bool{false, true} {
		b.Run(fmt.Sprintf("shed=%v", shed), func(b *testing.B) {
			seen = 0
			var sf func([]byte) bool
			if shed {
				sf = infoNoise
			}
			out, wait := drainPipe(b)
			t := newTap(lineTap{line: fn, noise: sf})
			n := max(1, b.N*benchChunk/len(block)) // whole blocks, so WARN lines can be counted
			b.SetBytes(int64(n * len(block) / b.N))
			b.ResetTimer()
			relay(feedBlocks(b, block, n), out, Stdout, t, nil)
			shedN, lost := t.close()
			wait()
			b.StopTimer()
			b.ReportMetric(float64(shedN)/float64(b.N), "shed/op")
			b.ReportMetric(float64(lost)/float64(b.N), "lost/op")
			b.ReportMetric(float64(n*warns-seen), "warn-missed")
		})
	}
}

// feedBlocks writes block n times to a new pipe from a goroutine (in
// benchChunk writes) and returns the read end.
func feedBlocks(b *testing.B, block []byte, n int) *os.File {
	b.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	go func() {
		defer w.Close()
		for i := 0; i < n; i++ {
			for p := block; len(p) > 0; {
				k := min(benchChunk, len(p))
				if _, err := w.Write(p[:k]); err != nil {
					return
				}
				p = p[k:]
			}
		}
	}()
	return r
}
