package main

import (
	"bytes"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ncclrun/ncclrun/internal/testutil"
	"github.com/ncclrun/ncclrun/nccllog"
)

// xzHeader is the stream header of an xz file (The .xz File Format 1.0.4:
// magic, flags with a CRC32 check, their CRC32) and the first bytes of a
// block; explain refuses the input by its magic bytes.
var xzHeader = []byte{0xfd, '7', 'z', 'X', 'Z', 0x00, 0x00, 0x01, 0x69, 0x22, 0xde, 0x36, 0x02, 0x00, 0x21, 0x01}

// zstdDeclaring is nframes zstd frames (RFC 8878), each declaring a window
// of 1<<windowLog bytes and holding data in one raw block.
func zstdDeclaring(nframes int, windowLog uint, data []byte) []byte {
	var b bytes.Buffer
	for i := 0; i < nframes; i++ {
		b.Write([]byte{0x28, 0xb5, 0x2f, 0xfd})
		b.WriteByte(0x00)                        // descriptor: no FCS, not single segment, no checksum, no dict
		b.WriteByte(byte((windowLog - 10) << 3)) // window descriptor: exponent, mantissa 0
		h := uint32(len(data))<<3 | 0<<1 | 1     // last block, raw
		b.Write([]byte{byte(h), byte(h >> 8), byte(h >> 16)})
		b.Write(data)
	}
	return b.Bytes()
}

const capLog = "h:1:2 [0] misc/ibvwrap.cc:190 NCCL WARN Call to ibv_create_cq failed with error Cannot allocate memory\n"

// TestExplainDecoderCaps: a zstd input whose frames declare windows over
// nccllog.DecoderCap, and an xz input, are refused with one line naming
// the input, what it declares and how to decompress it instead, exit 2,
// in bounded memory and before any window is allocated (a 1 GiB address
// space suffices); inputs within the cap are read as before.
func TestExplainDecoderCaps(t *testing.T) {
	tmp := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(tmp, name)
		require.NoError(t, os.WriteFile(p, data, 0o644))
		return p
	}
	okGzip := write("ok.gz", gzipBytes(t, []byte(capLog)))
	okZstd := write("ok.zst", zstdDeclaring(2, 21, []byte(capLog)))
	const zstdHint = " exceeds explain's 2 MiB decompression limit (decompress it first: zstd -dc FILE | ncclrun explain -)"
	cases := []struct{ name, path, msg string }{
		{"zstd frames declaring 512 MiB windows", write("huge.zst", zstdDeclaring(4, 29, []byte(capLog))), "zstd window of 512 MiB" + zstdHint},
		{"zstd frame declaring 4 MiB", write("four.zst", zstdDeclaring(1, 22, []byte(capLog))), "zstd window of 4 MiB" + zstdHint},
		{"zstd window over the cap in a later frame", write("later.zst", append(zstdDeclaring(1, 21, []byte(capLog)), zstdDeclaring(1, 23, []byte(capLog))...)), "zstd window" + zstdHint},
		{"xz", write("log.txt", append(append([]byte{}, xzHeader...), capLog...)), "xz-compressed input is not read (decompress it first: xz -dc FILE | ncclrun explain -)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// After a good input, so that the refused one is not the first opened.
			r := runMeasured(t, "explain", okGzip, okZstd, c.path, okZstd)
			t.Logf("peak RSS %d KiB, stderr %q", r.maxRSS>>10, r.stderr)
			require.Equal(t, ExitUsage, r.code, "stderr %q", r.stderr)
			assert.Empty(t, r.stdout)
			lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
			require.Len(t, lines, 1, r.stderr)
			assert.Equal(t, "ncclrun: explain: "+c.path+": "+c.msg, lines[0])
			assert.Less(t, r.maxRSS, int64(16<<20))
			if pl, err := exec.LookPath("prlimit"); err == nil {
				// Under a 1 GiB address-space limit: refused, not out of memory.
				cmd := exec.Command(pl, "--as=1073741824", bin, "explain", c.path)
				cmd.Env = baseEnv(t)
				out, _ := cmd.CombinedOutput()
				assert.Equal(t, ExitUsage, cmd.ProcessState.ExitCode(), "%s", out)
				assert.Contains(t, string(out), c.msg)
			} else {
				testutil.SkipOrFail(t, "prlimit not on PATH: %v", err)
			}
		})
	}
	t.Run("within the cap", func(t *testing.T) {
		r := runMeasured(t, "explain", "--json", okGzip, okZstd)
		require.Equal(t, 0, r.code, r.stderr)
		assert.Contains(t, r.stdout, `"id": "memlock"`)
		assert.Contains(t, r.stdout, `"lines": 3`)
	})
}

// TestExplainRealCompressors: what the zstd tool writes at levels within
// the cap (with and without checksums, in small blocks) explains as the
// plain log; its levels and --long settings over the cap are refused with
// the cap's message, and what the xz tool writes is refused by its magic.
func TestExplainRealCompressors(t *testing.T) {
	dir := corpusDir(t)
	plainPath := filepath.Join(dir, "memlock-32.log")
	plain := []byte(mustRead(t, plainPath))
	big := bytes.Repeat(plain, 64) // several blocks at --block-size=64KiB
	want := ncclrun(t, "explain", "--json", plainPath)
	require.Equal(t, 0, want.code)
	tmp := t.TempDir()
	bigPath := filepath.Join(tmp, "big.log")
	require.NoError(t, os.WriteFile(bigPath, big, 0o644))
	wantBig := ncclrun(t, "explain", "--json", bigPath)
	require.Equal(t, 0, wantBig.code)

	tool := func(t *testing.T, in []byte, argv ...string) []byte {
		t.Helper()
		p, err := exec.LookPath(argv[0])
		if err != nil {
			testutil.SkipOrFail(t, "%s not on PATH: %v", argv[0], err)
		}
		cmd := exec.Command(p, argv[1:]...)
		cmd.Stdin = bytes.NewReader(in)
		out, err := cmd.Output()
		require.NoError(t, err, "%v", argv)
		return out
	}
	ok := []struct {
		name string
		big  bool
		argv []string
	}{
		{"zstd default", false, []string{"zstd", "-c"}},
		{"zstd default big", true, []string{"zstd", "-c"}},
		{"zstd -8 checksum", true, []string{"zstd", "-8", "--check", "-c"}},
		{"zstd no checksum", false, []string{"zstd", "--no-check", "-c"}},
		{"zstd blocks", true, []string{"zstd", "-1", "-B65536", "-T1", "-c"}},
	}
	for _, c := range ok {
		t.Run(c.name, func(t *testing.T) {
			in, w := plain, want
			if c.big {
				in, w = big, wantBig
			}
			p := filepath.Join(tmp, "in")
			require.NoError(t, os.WriteFile(p, tool(t, in, c.argv...), 0o644))
			r := runMeasured(t, "explain", "--json", p)
			require.Equal(t, 0, r.code, "stderr %q", r.stderr)
			require.JSONEq(t, w.stdout, r.stdout)
			assert.Less(t, r.maxRSS, int64(16<<20))
		})
	}
	// From stdin the tool does not know the size, so each level declares
	// its full window.
	for _, c := range []struct {
		name string
		argv []string
		msg  string
	}{
		{"zstd -9", []string{"zstd", "-9", "-c"}, "zstd window of 4 MiB exceeds explain's 2 MiB decompression limit (decompress it first: zstd -dc FILE | ncclrun explain -)"},
		{"zstd -19", []string{"zstd", "-19", "-c"}, "zstd window of 8 MiB exceeds explain's 2 MiB decompression limit (decompress it first: zstd -dc FILE | ncclrun explain -)"},
		{"zstd --long=30", []string{"zstd", "--long=30", "-c"}, "zstd window of 1 GiB exceeds"},
		{"xz default", []string{"xz", "-c"}, "xz-compressed input is not read (decompress it first: xz -dc FILE | ncclrun explain -)"},
		{"xz -0 sha256", []string{"xz", "-0", "--check=sha256", "-c"}, "xz-compressed input is not read"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(tmp, "refused")
			require.NoError(t, os.WriteFile(p, tool(t, big, c.argv...), 0o644))
			r := runMeasured(t, "explain", p)
			requireUsage(t, result{code: r.code, stdout: r.stdout, stderr: r.stderr}, c.msg)
			assert.Less(t, r.maxRSS, int64(16<<20))
		})
	}
}

// TestExplainZstdFrames: what the zstd tool writes, concatenated with
// skippable frames (RFC 8878 3.1.2) between, decompresses to the same
// bytes and explains as the plain log; a frame whose back-references reach
// further than the 2 MiB it declares, a bad checksum and a truncated file
// are one line naming the input and exit 2, within bounded memory, never
// wrong output.
func TestExplainZstdFrames(t *testing.T) {
	zstdTool := testutil.RequireTool(t, "zstd")
	tool := func(t *testing.T, in []byte, args ...string) []byte {
		t.Helper()
		cmd := exec.Command(zstdTool, append([]string{"-q", "-c"}, args...)...)
		cmd.Stdin = bytes.NewReader(in)
		out, err := cmd.Output()
		require.NoError(t, err, "zstd %v", args)
		return out
	}
	skippable := func(magic byte, payload string) []byte {
		b := binary.LittleEndian.AppendUint32(nil, 0x184d2a50+uint32(magic))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(payload)))
		return append(b, payload...)
	}
	plain := []byte(mustRead(t, filepath.Join(corpusDir(t), "memlock-32.log")))
	tmp := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(tmp, name)
		require.NoError(t, os.WriteFile(p, data, 0o644))
		return p
	}

	t.Run("pzstd", func(t *testing.T) {
		// pzstd writes a skippable frame (the next frame's size) before
		// each frame: the file starts with one.
		pzstd := testutil.RequireTool(t, "pzstd")
		cmd := exec.Command(pzstd, "-q", "-c", "-p", "2")
		cmd.Stdin = bytes.NewReader(bytes.Repeat(plain, 64))
		data, err := cmd.Output()
		require.NoError(t, err)
		require.Equal(t, uint32(0x184d2a50), binary.LittleEndian.Uint32(data)&^0xf, "pzstd's output starts with a skippable frame")
		want := ncclrun(t, "explain", "--json", repeatedFile(t, tmp, plain, 64))
		require.Equal(t, 0, want.code)
		res := runMeasured(t, "explain", "--json", write("p.zst", data))
		require.Equal(t, 0, res.code, "stderr %q", res.stderr)
		require.JSONEq(t, want.stdout, res.stdout)
	})

	t.Run("frames and skippable frames", func(t *testing.T) {
		data := bytes.Join([][]byte{skippable(0, "first"), tool(t, plain, "--check"), skippable(15, ""),
			tool(t, plain, "-8", "--no-check"), skippable(7, "last")}, nil)
		in, err := nccllog.Open("-", bytes.NewReader(data))
		require.NoError(t, err)
		got, err := io.ReadAll(in)
		require.NoError(t, err)
		require.NoError(t, in.Close())
		require.True(t, bytes.Equal(bytes.Repeat(plain, 2), got), "decompressed bytes differ")

		want := ncclrun(t, "explain", "--json", repeatedFile(t, tmp, plain, 2))
		require.Equal(t, 0, want.code)
		res := runMeasured(t, "explain", "--json", write("frames.zst", data))
		require.Equal(t, 0, res.code, "stderr %q", res.stderr)
		require.JSONEq(t, want.stdout, res.stdout)
	})

	// 2.5 MiB of random bytes, then their first 64 KiB again: the copy is
	// one match 2.5 MiB back, which zstd --long=22 finds in a frame
	// declaring a 4 MiB window (refused by the cap). The same frame
	// declaring 2 MiB (its window descriptor patched) is corrupt: the
	// decoder keeps 2 MiB, and the match is an error, not other bytes.
	head := make([]byte, 2<<20+512<<10)
	_, _ = rand.NewChaCha8([32]byte{2}).Read(head)
	long := tool(t, append(head, head[:64<<10]...), "-1", "--long=22")
	require.Equal(t, []byte{0x28, 0xb5, 0x2f, 0xfd, 0x04, 0x60}, long[:6], "a frame with a checksum declaring 4 MiB")
	patched := append([]byte{}, long...)
	patched[5] = 0x58 // window descriptor: 2 MiB
	sum := tool(t, plain, "--check")
	badSum := append([]byte{}, sum...)
	badSum[len(badSum)-1] ^= 0xff
	reserved := append(append([]byte{}, tool(t, plain, "--no-check")...), 0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x58, 0x07, 0x00, 0x00)
	for _, c := range []struct {
		name, file string
		data       []byte
		msg        string // the end of the one line
	}{
		{"4 MiB window", "long.zst", long, "zstd window of 4 MiB exceeds explain's 2 MiB decompression limit (decompress it first: zstd -dc FILE | ncclrun explain -)"},
		{"match past the 2 MiB window", "patched.zst", patched, "zstd: match offset (2621440) bigger than current history (0)"},
		{"bad checksum", "badsum.zst", badSum, "badsum.zst: zstd: CRC check failed"},
		{"truncated in a block", "cut.zst", sum[:len(sum)/2], "cut.zst: unexpected EOF"},
		{"truncated in the checksum", "cutsum.zst", sum[:len(sum)-1], "cutsum.zst: unexpected EOF"},
		{"truncated frame header", "cuthead.zst", append(append([]byte{}, sum...), sum[:6]...), "cuthead.zst: unexpected EOF"},
		{"reserved block type", "reserved.zst", reserved, "reserved.zst: zstd: invalid input: reserved block type encountered"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := write(c.file, c.data)
			r := runMeasured(t, "explain", p)
			requireUsage(t, result{code: r.code, stdout: r.stdout, stderr: r.stderr}, c.msg)
			line := strings.TrimSuffix(r.stderr, "\n")
			assert.True(t, strings.HasPrefix(line, "ncclrun: explain: "+p+": "), line)
			assert.True(t, strings.HasSuffix(line, c.msg), line)
			assert.Less(t, r.maxRSS, int64(16<<20))
		})
	}
}

// repeatedFile writes in repeated n times (what n concatenated streams
// decompress to) and returns its path.
func repeatedFile(t *testing.T, dir string, in []byte, n int) string {
	p := filepath.Join(dir, "plain-x"+strings.Repeat("i", n))
	require.NoError(t, os.WriteFile(p, bytes.Repeat(in, n), 0o644))
	return p
}
