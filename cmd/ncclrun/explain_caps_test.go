package main

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
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

// xzDeclaring is a valid xz file (format 1.0.4) of nblocks blocks, each
// holding data in one uncompressed LZMA2 chunk, whose block headers declare
// an LZMA2 dictionary of dictCode (37: 1.5 GiB; 16: 8 MiB). The decoder
// sizes its dictionary from the header, whatever the data needs.
func xzDeclaring(nblocks int, dictCode byte, data []byte) []byte {
	var b bytes.Buffer
	le32 := func(v uint32) { _ = binary.Write(&b, binary.LittleEndian, v) }
	// Stream header: magic, flags (check CRC32 = 1), CRC32 of the flags.
	flags := []byte{0x00, 0x01}
	b.Write([]byte{0xfd, '7', 'z', 'X', 'Z', 0x00})
	b.Write(flags)
	le32(crc32.ChecksumIEEE(flags))
	type rec struct{ unpadded, uncompressed uint64 }
	var recs []rec
	for i := 0; i < nblocks; i++ {
		// Block header: size byte ((len/4)-1), flags (1 filter, no sizes),
		// filter LZMA2 (0x21), 1 property byte, the dict code, padding, CRC32.
		hdr := []byte{0x02, 0x00, 0x21, 0x01, dictCode, 0x00, 0x00, 0x00}
		hdr = binary.LittleEndian.AppendUint32(hdr, crc32.ChecksumIEEE(hdr))
		b.Write(hdr)
		// LZMA2: an uncompressed chunk resetting the dictionary, then end.
		comp := []byte{0x01, byte((len(data) - 1) >> 8), byte(len(data) - 1)}
		comp = append(comp, data...)
		comp = append(comp, 0x00)
		b.Write(comp)
		for (len(hdr)+len(comp))%4 != 0 {
			comp = append(comp, 0)
			b.WriteByte(0)
		}
		le32(crc32.ChecksumIEEE(data))
		recs = append(recs, rec{uint64(len(hdr) + 3 + len(data) + 1 + 4), uint64(len(data))}) // unpadded size
	}
	// Index: indicator, record count, records, padding, CRC32.
	idx := []byte{0x00}
	idx = binary.AppendUvarint(idx, uint64(len(recs)))
	for _, r := range recs {
		idx = binary.AppendUvarint(idx, r.unpadded)
		idx = binary.AppendUvarint(idx, r.uncompressed)
	}
	for len(idx)%4 != 0 {
		idx = append(idx, 0)
	}
	idx = binary.LittleEndian.AppendUint32(idx, crc32.ChecksumIEEE(idx))
	b.Write(idx)
	// Stream footer: CRC32 of backward size and flags, backward size, flags, "YZ".
	foot := binary.LittleEndian.AppendUint32(nil, uint32(len(idx)/4-1))
	foot = append(foot, flags...)
	b.Write(binary.LittleEndian.AppendUint32(nil, crc32.ChecksumIEEE(foot)))
	b.Write(foot)
	b.WriteString("YZ")
	return b.Bytes()
}

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

// TestExplainDecoderCaps: compressed inputs whose headers declare huge
// dictionaries or windows are refused with one line naming the input and
// exit 2, in bounded memory (the 240-byte xz took 3.2 GB, each 512 MiB zstd
// frame 537 MB); ones within the cap are read as before.
func TestExplainDecoderCaps(t *testing.T) {
	tmp := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(tmp, name)
		require.NoError(t, os.WriteFile(p, data, 0o644))
		return p
	}
	hugeXZ := xzDeclaring(6, 37, []byte("NCCL\n"))
	t.Logf("huge xz: %d bytes", len(hugeXZ))
	okXZ := write("ok.xz", xzDeclaring(2, 16, []byte(capLog)))
	okZstd := write("ok.zst", zstdDeclaring(2, 23, []byte(capLog)))
	cases := []struct{ name, path, msg string }{
		{"xz declaring 1.5 GiB dictionaries", write("huge.xz", hugeXZ), "xz dictionary of 1.5 GiB"},
		{"zstd frames declaring 512 MiB windows", write("huge.zst", zstdDeclaring(4, 29, []byte(capLog))), "zstd window of 512 MiB"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// After a good input, so that the huge one is not the first opened.
			r := runMeasured(t, "explain", okXZ, c.path, okZstd)
			t.Logf("peak RSS %d KiB, stderr %q", r.maxRSS>>10, r.stderr)
			require.Equal(t, ExitUsage, r.code, "stderr %q", r.stderr)
			assert.Empty(t, r.stdout)
			lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
			require.Len(t, lines, 1, r.stderr)
			assert.Contains(t, lines[0], c.path)
			assert.Contains(t, lines[0], c.msg)
			assert.Contains(t, lines[0], "8 MiB")
			assert.Less(t, r.maxRSS, int64(32<<20))
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
		r := runMeasured(t, "explain", "--json", okXZ, okZstd)
		require.Equal(t, 0, r.code, r.stderr)
		assert.Contains(t, r.stdout, `"id": "memlock"`)
		assert.Contains(t, r.stdout, `"lines": 4`)
	})
}

// TestExplainRealCompressors: what the xz and zstd tools write, in the
// container shapes the guards walk (several blocks and streams, other
// checks, filter chains, skippable frames, checksums), explains as the
// plain log; their biggest settings are refused with the cap's message.
// (Filter chains such as --delta --x86 are not read by the xz library at
// all: "unsupported filter count".)
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
		{"xz default", false, []string{"xz", "-c"}},
		{"xz -0 sha256", false, []string{"xz", "-0", "--check=sha256", "-c"}},
		{"xz crc64 none", false, []string{"xz", "--check=none", "-c"}},
		{"xz blocks", true, []string{"xz", "-6", "--block-size=65536", "-T1", "-c"}},
		{"xz lzma2 1 MiB dict", false, []string{"xz", "--lzma2=preset=1,dict=1MiB", "-c"}},
		{"zstd default", false, []string{"zstd", "-c"}},
		{"zstd -19 checksum", true, []string{"zstd", "-19", "--check", "-c"}},
		{"zstd no checksum", false, []string{"zstd", "--no-check", "-c"}},
		{"zstd blocks", true, []string{"zstd", "-1", "-B65536", "-T1", "-c"}},
	}
	for _, c := range ok {
		t.Run(c.name, func(t *testing.T) {
			in, w := plain, want
			if c.big {
				in, w = big, wantBig
			}
			data := tool(t, in, c.argv...)
			if c.argv[0] == "xz" {
				// Two streams with stream padding between them.
				data = append(append(append([]byte{}, data...), 0, 0, 0, 0), data...)
				w = ncclrun(t, "explain", "--json", repeatedFile(t, tmp, in, 2))
			}
			p := filepath.Join(tmp, "in")
			require.NoError(t, os.WriteFile(p, data, 0o644))
			r := runMeasured(t, "explain", "--json", p)
			require.Equal(t, 0, r.code, "stderr %q", r.stderr)
			require.JSONEq(t, w.stdout, r.stdout)
		})
	}
	for _, c := range []struct {
		name string
		argv []string
		msg  string
	}{
		{"xz -9", []string{"xz", "-9", "-c"}, "xz dictionary of 64 MiB"},
		{"zstd --long=30", []string{"zstd", "--long=30", "-c"}, "zstd window of 1 GiB"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(tmp, "refused")
			require.NoError(t, os.WriteFile(p, tool(t, big, c.argv...), 0o644))
			requireUsage(t, ncclrun(t, "explain", p), c.msg)
		})
	}
}

// TestExplainZstdFrames: what the zstd tool writes, concatenated with
// skippable frames (RFC 8878 3.1.2) between, decompresses to the same
// bytes and explains as the plain log; a frame whose back-references reach
// further than the 8 MiB it declares, a bad checksum and a truncated file
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
			tool(t, plain, "-19", "--no-check"), skippable(7, "last")}, nil)
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

	// 8.5 MiB of random bytes, then their first 64 KiB again: the copy is
	// one match 8.5 MiB back, which zstd --long=24 finds in a frame
	// declaring a 16 MiB window (refused by the guard). The same frame
	// declaring 8 MiB (its window descriptor patched) is corrupt: the
	// decoder keeps 8 MiB, and the match is an error, not other bytes.
	head := make([]byte, 8<<20+512<<10)
	_, _ = rand.NewChaCha8([32]byte{2}).Read(head)
	long := tool(t, append(head, head[:64<<10]...), "-1", "--long=24")
	require.Equal(t, []byte{0x28, 0xb5, 0x2f, 0xfd, 0x04, 0x70}, long[:6], "a frame with a checksum declaring 16 MiB")
	patched := append([]byte{}, long...)
	patched[5] = 0x68 // window descriptor: 8 MiB
	sum := tool(t, plain, "--check")
	badSum := append([]byte{}, sum...)
	badSum[len(badSum)-1] ^= 0xff
	reserved := append(append([]byte{}, tool(t, plain, "--no-check")...), 0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x68, 0x07, 0x00, 0x00)
	for _, c := range []struct {
		name, file string
		data       []byte
		msg        string // the end of the one line
	}{
		{"16 MiB window", "long.zst", long, "zstd window of 16 MiB exceeds explain's 8 MiB decompression limit (decompress it first: zstd -dc FILE | ncclrun explain -)"},
		{"match past the 8 MiB window", "patched.zst", patched, "zstd: match offset (8912896) bigger than current history (0)"},
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
			assert.Less(t, r.maxRSS, int64(32<<20))
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
