package main

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ncclrun/ncclrun/internal/testutil"
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

// repeatedFile writes in repeated n times (what n concatenated streams
// decompress to) and returns its path.
func repeatedFile(t *testing.T, dir string, in []byte, n int) string {
	p := filepath.Join(dir, "plain-x"+strings.Repeat("i", n))
	require.NoError(t, os.WriteFile(p, bytes.Repeat(in, n), 0o644))
	return p
}

// FuzzDecoderGuards: the xz and zstd guards never panic and pass what they
// pass unchanged, whatever the bytes.
func FuzzDecoderGuards(f *testing.F) {
	f.Add(xzDeclaring(2, 16, []byte(capLog)))
	f.Add(xzDeclaring(1, 37, []byte("x")))
	f.Add(zstdDeclaring(2, 23, []byte(capLog)))
	f.Add(zstdDeclaring(1, 29, []byte("x")))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, g := range []io.Reader{newXZGuard(bytes.NewReader(data), decoderCap), newZstdGuard(bytes.NewReader(data), decoderCap)} {
			out, err := io.ReadAll(g)
			if err == nil && !bytes.Equal(out, data) {
				t.Fatalf("guard changed the data")
			}
		}
		if r, c, err := decompress(bytes.NewReader(data)); err == nil {
			_, _ = io.Copy(io.Discard, r)
			if c != nil {
				_ = c.Close()
			}
		}
	})
}
