package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ncclrun/ncclrun/internal/testutil"
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

// bzip2Hint, zstdHint and xzHint are the one-line refusals of bzip2, zstd
// and xz inputs.
const (
	bzip2Hint = "bzip2-compressed input is not read (decompress it first: bzip2 -dc FILE | ncclrun explain -)"
	zstdHint  = "zstd-compressed input is not read (decompress it first: zstd -dc FILE | ncclrun explain -)"
	xzHint    = "xz-compressed input is not read (decompress it first: xz -dc FILE | ncclrun explain -)"
)

// TestExplainRefusedFormats: zstd inputs (whatever window their frames
// declare, or a skippable frame first), bzip2 and xz inputs are refused with one
// line naming the input and how to decompress it instead, exit 2, in
// bounded memory and before any history is allocated (a 1 GiB address
// space suffices); the good inputs beside them are read as usual.
func TestExplainRefusedFormats(t *testing.T) {
	tmp := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(tmp, name)
		require.NoError(t, os.WriteFile(p, data, 0o644))
		return p
	}
	okGzip := write("ok.gz", gzipBytes(t, []byte(capLog)))
	okPlain := write("ok.log", []byte(capLog))
	skippable := []byte{0x50, 0x2a, 0x4d, 0x18, 0x02, 0x00, 0x00, 0x00, 'p', 'z'}
	cases := []struct{ name, path, msg string }{
		{"zstd frames declaring 512 MiB windows", write("huge.zst", zstdDeclaring(4, 29, []byte(capLog))), zstdHint},
		{"zstd frame declaring 2 MiB", write("two.zst", zstdDeclaring(1, 21, []byte(capLog))), zstdHint},
		{"zstd skippable frame first", write("log.txt", append(skippable, zstdDeclaring(1, 21, []byte(capLog))...)), zstdHint},
		{"xz", write("log.gz", append(append([]byte{}, xzHeader...), capLog...)), xzHint},
		{"bzip2", write("log.zst", append([]byte("BZh91AY&SY"), capLog...)), bzip2Hint},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// After a good input, so that the refused one is not the first opened.
			r := runMeasured(t, "explain", okGzip, okPlain, c.path, okPlain)
			require.Equal(t, ExitUsage, r.code, "stderr %q", r.stderr)
			assert.Empty(t, r.stdout)
			lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
			require.Len(t, lines, 1, r.stderr)
			assert.Equal(t, "ncclrun: explain: "+c.path+": "+c.msg, lines[0])
			assertRSSBounded(t, r)
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
	t.Run("the good inputs alone", func(t *testing.T) {
		r := runMeasured(t, "explain", "--json", okGzip, okPlain)
		require.Equal(t, 0, r.code, r.stderr)
		assert.Contains(t, r.stdout, `"id": "memlock"`)
		assert.Contains(t, r.stdout, `"lines": 2`)
	})
}

// TestExplainRealCompressors: what gzip writes at its highest and lowest
// levels explains as the plain log in bounded memory; what the bzip2 tool,
// the zstd tool (at any level, --long, or pzstd's skippable frames) and
// the xz tool write is refused by its magic bytes with the one-line hint.
func TestExplainRealCompressors(t *testing.T) {
	dir := corpusDir(t)
	plainPath := filepath.Join(dir, "memlock-32.log")
	plain := []byte(mustRead(t, plainPath))
	big := bytes.Repeat(plain, 64)
	tmp := t.TempDir()
	bigPath := filepath.Join(tmp, "big.log")
	require.NoError(t, os.WriteFile(bigPath, big, 0o644))
	want := ncclrun(t, "explain", "--json", bigPath)
	require.Equal(t, 0, want.code)

	tool := func(t *testing.T, in []byte, argv ...string) []byte {
		t.Helper()
		p := testutil.RequireTool(t, argv[0])
		cmd := exec.Command(p, argv[1:]...)
		cmd.Stdin = bytes.NewReader(in)
		out, err := cmd.Output()
		require.NoError(t, err, "%v", argv)
		return out
	}
	for _, argv := range [][]string{{"gzip", "-9", "-c"}, {"gzip", "-1", "-c"}} {
		t.Run(strings.Join(argv[:2], " "), func(t *testing.T) {
			p := filepath.Join(tmp, "in")
			require.NoError(t, os.WriteFile(p, tool(t, big, argv...), 0o644))
			r := runMeasured(t, "explain", "--json", p)
			require.Equal(t, 0, r.code, "stderr %q", r.stderr)
			require.JSONEq(t, want.stdout, r.stdout)
			assertRSSBounded(t, r)
		})
	}
	for _, c := range []struct {
		name string
		argv []string
		msg  string
	}{
		{"bzip2 -9", []string{"bzip2", "-9", "-c"}, bzip2Hint},
		{"bzip2 -1", []string{"bzip2", "-1", "-c"}, bzip2Hint},
		{"zstd default", []string{"zstd", "-c"}, zstdHint},
		{"zstd -19", []string{"zstd", "-19", "-c"}, zstdHint},
		{"zstd --long=30", []string{"zstd", "--long=30", "-c"}, zstdHint},
		{"pzstd", []string{"pzstd", "-q", "-c", "-p", "2"}, zstdHint},
		{"xz default", []string{"xz", "-c"}, xzHint},
		{"xz -0 sha256", []string{"xz", "-0", "--check=sha256", "-c"}, xzHint},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(tmp, "refused")
			require.NoError(t, os.WriteFile(p, tool(t, big, c.argv...), 0o644))
			r := runMeasured(t, "explain", p)
			requireUsage(t, result{code: r.code, stdout: r.stdout, stderr: r.stderr}, c.msg)
			assert.Equal(t, "ncclrun: explain: "+p+": "+c.msg+"\n", r.stderr)
			assertRSSBounded(t, r)
		})
	}
}
