package nccllog

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDebugFiles: %h is the host name up to its first dot, %p any pid
// (digits, in the file name or a directory), %% a percent sign, and glob
// characters in the pattern are literal; only regular files modified since
// the start count.
func TestDebugFiles(t *testing.T) {
	d := t.TempDir()
	host, err := os.Hostname()
	require.NoError(t, err)
	host, _, _ = strings.Cut(host, ".")
	since := time.Now().Add(-time.Minute)
	write := func(name string) string {
		p := filepath.Join(d, name)
		require.NoError(t, os.WriteFile(p, []byte("x\n"), 0o600))
		return p
	}
	a, b := write("nccl."+host+".101"), write("nccl."+host+".102")
	write("nccl.otherhost.103")
	old := write("nccl." + host + ".99")
	require.NoError(t, os.Chtimes(old, since.Add(-time.Hour), since.Add(-time.Hour)))
	require.NoError(t, os.Mkdir(filepath.Join(d, "nccl."+host+".104"), 0o700))
	pct := write("50%.[1].log")
	write("50%.1.log")
	write("nccl." + host + ".abc") // %p is a pid: digits
	for _, sub := range []string{"7", "x"} {
		require.NoError(t, os.Mkdir(filepath.Join(d, sub), 0o700))
	}
	inDir := write("7/log")
	write("x/log")

	for _, c := range []struct {
		name, pattern string
		want          []string
	}{
		{"%h and %p", filepath.Join(d, "nccl.%h.%p"), []string{a, b}},
		{"literal name", a, []string{a}},
		{"%% and glob characters are literal", filepath.Join(d, "50%%.[1].log"), []string{pct}},
		{"%p in a directory", filepath.Join(d, "%p/log"), []string{inDir}},
		{"none", filepath.Join(d, "missing.%p"), nil},
		{"empty pattern", "", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, DebugFiles(c.pattern, since))
		})
	}
}

// TestDebugFilesBounded: %p's directories are read up to a budget of
// entries, however many there are ("/%p/%p/%p/%p" must not walk the file
// system).
func TestDebugFilesBounded(t *testing.T) {
	d := t.TempDir()
	for i := range 50 {
		require.NoError(t, os.WriteFile(filepath.Join(d, strconv.Itoa(100+i)), nil, 0o600))
	}
	w := debugWalk{since: time.Now().Add(-time.Hour), budget: 10}
	w.walk(d, debugParts([]string{"%p"}, "h"))
	assert.Equal(t, 0, w.budget)
	assert.LessOrEqual(t, len(w.files), 10)
	assert.NotEmpty(t, w.files)
}
