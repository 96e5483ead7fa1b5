package zstd

// Tests of this copy (not Go's): the window cap that ncclrun's explain
// relies on, and the frame shapes the zstd program writes and explain
// reads (concatenated, skippable and checksummed frames), in testify's
// table style.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// compress runs the zstd program on data with args (from stdin: the
// frame's content size is not in its header, the window is the level's or
// --long's).
func compress(t *testing.T, data []byte, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(findZstd(t), append([]string{"-q", "-c"}, args...)...)
	cmd.Stdin = bytes.NewReader(data)
	out, err := cmd.Output()
	require.NoError(t, err, "zstd %v", args)
	return out
}

// declaredWindow is the window the first frame's header declares (a frame
// that is not single-segment).
func declaredWindow(t *testing.T, frame []byte) int {
	t.Helper()
	require.Equal(t, uint32(0xfd2fb528), binary.LittleEndian.Uint32(frame))
	require.Zero(t, frame[4]&(1<<5), "single-segment frame")
	wd := frame[5]
	base := 1 << (10 + wd>>3)
	return base + base/8*int(wd&7)
}

// TestWindowCap: a frame whose back-references reach further than
// MaxWindowSize is an error, after a prefix of the right output, never
// wrong output; within MaxWindowSize the output is exact.
func TestWindowCap(t *testing.T) {
	rng := rand.NewChaCha8([32]byte{1})
	for _, c := range []struct {
		name      string
		distance  int // bytes between a run of random data and its copy
		long      string
		window    int // what the header declares
		wantError string
	}{
		{"copy 8.5 MiB back, 16 MiB window", 8<<20 + 512<<10, "--long=24", 16 << 20, "offset past window"},
		{"copy 7.5 MiB back, 8 MiB window", 7<<20 + 512<<10, "--long=23", 8 << 20, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			head := make([]byte, c.distance)
			_, _ = rng.Read(head)
			data := append(head, head[:64<<10]...)
			frame := compress(t, data, "-1", c.long)
			require.Equal(t, c.window, declaredWindow(t, frame))
			// Random data does not compress: the frame is about as
			// long as data only if the copy was found as one match.
			require.Less(t, len(frame), len(data)-32<<10, "the copy was not found as a match")

			got, err := io.ReadAll(NewReader(bytes.NewReader(frame)))
			if c.wantError == "" {
				require.NoError(t, err)
				require.True(t, bytes.Equal(data, got), "output differs")
				return
			}
			require.ErrorContains(t, err, c.wantError)
			require.True(t, bytes.HasPrefix(data, got), "output before the error is not a prefix of the data")
			assert.GreaterOrEqual(t, len(got), 8<<20, "the error came before the window filled")
		})
	}
}

// TestFrames: concatenated, skippable and checksummed frames read as the
// concatenation of their content; a bad checksum, trailing garbage and
// truncation are errors.
func TestFrames(t *testing.T) {
	log := bytes.Repeat([]byte("h:1:2 [0] misc/ibvwrap.cc:190 NCCL WARN Call to ibv_create_cq failed with error Cannot allocate memory\n"), 300)
	other := []byte("rank 3 finished\n")
	sum := compress(t, log, "--check")
	nosum := compress(t, other, "--no-check")
	empty := compress(t, nil)
	skip := func(magic byte, payload string) []byte {
		b := binary.LittleEndian.AppendUint32(nil, 0x184d2a50+uint32(magic))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(payload)))
		return append(b, payload...)
	}
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	badSum := cat(sum)
	badSum[len(badSum)-1] ^= 0xff

	for _, c := range []struct {
		name    string
		in      []byte
		want    []byte
		wantErr string // empty: no error
	}{
		{"checksummed frame", sum, log, ""},
		{"frame without checksum", nosum, other, ""},
		{"empty frame", empty, nil, ""},
		{"three frames", cat(sum, nosum, sum), cat(log, other, log), ""},
		{"skippable frames first, between and last", cat(skip(0, "x"), sum, skip(15, ""), nosum, skip(7, "payload")), cat(log, other), ""},
		{"only a skippable frame", skip(3, "abc"), nil, ""},
		{"empty frame between", cat(nosum, empty, nosum), cat(other, other), ""},
		{"bad checksum", badSum, nil, "invalid checksum"},
		{"trailing garbage", cat(nosum, []byte("garbage!")), other, "invalid magic number"},
		{"truncated in the checksum", sum[:len(sum)-2], nil, io.ErrUnexpectedEOF.Error()},
		{"truncated in a block", sum[:len(sum)/2], nil, io.ErrUnexpectedEOF.Error()},
		{"truncated after the magic number", sum[:4], nil, io.ErrUnexpectedEOF.Error()},
		{"truncated second frame", cat(nosum, sum[:8]), other, io.ErrUnexpectedEOF.Error()},
		{"truncated skippable frame", cat(nosum, skip(0, "abcdef")[:10]), other, io.ErrUnexpectedEOF.Error()},
	} {
		// A Reader skips a skippable frame by seeking where its input
		// can (a file, bytes.Reader), by reading it where not (explain's
		// guard): both ways.
		for _, in := range []struct {
			how string
			r   io.Reader
		}{{"seeker", bytes.NewReader(c.in)}, {"stream", struct{ io.Reader }{bytes.NewReader(c.in)}}} {
			t.Run(c.name+"/"+in.how, func(t *testing.T) {
				got, err := io.ReadAll(NewReader(in.r))
				if c.wantErr == "" {
					require.NoError(t, err)
				} else {
					require.ErrorContains(t, err, c.wantErr)
					if c.wantErr == io.ErrUnexpectedEOF.Error() {
						require.ErrorIs(t, err, io.ErrUnexpectedEOF)
					}
				}
				require.Equal(t, string(c.want), string(got))
			})
		}
	}
}

// TestWindowGrowth: a window allocates min(size, windowStart) first and
// its whole size once it holds more, never more than that, and keeps the
// last size bytes whatever the sizes of the saves.
func TestWindowGrowth(t *testing.T) {
	rng := rand.NewChaCha8([32]byte{3})
	for _, size := range []int{1000, windowStart - 1, windowStart, windowStart + 1, 3 * windowStart} {
		for _, chunk := range []int{1, 1000, 100 << 10, 128 << 10, windowStart + 7} {
			t.Run(fmt.Sprintf("size %d, saves of %d", size, chunk), func(t *testing.T) {
				var w window
				w.reset(size)
				var all []byte
				for len(all) < 2*size+chunk {
					b := make([]byte, chunk)
					_, _ = rng.Read(b)
					w.save(b)
					all = append(all, b...)
					tail := all[max(0, len(all)-size):]
					if w.len() != uint32(len(tail)) {
						t.Fatalf("after %d bytes the window holds %d, want %d", len(all), w.len(), len(tail))
					}
					want := size
					if len(all) <= windowStart && size > windowStart {
						want = windowStart
					}
					if cap(w.data) != want {
						t.Fatalf("after %d bytes the window has allocated %d, want %d", len(all), cap(w.data), want)
					}
					// The content around the first step, when the window
					// fills, and after save 1, 2, 4, 8, ...
					near := func(n int) bool { return len(all) > n-2*chunk-3 && len(all) < n+2*chunk+3 }
					if saves := len(all) / chunk; near(windowStart) || near(size) || saves&(saves-1) == 0 {
						require.True(t, bytes.Equal(tail, w.appendTo(nil, 0, w.len())), "window content after %d bytes", len(all))
					}
					if chunk == 1 && len(all) > windowStart+10 {
						break // past the first step: enough
					}
				}
			})
		}
	}
}
