package hang

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestAskDumps: each rank's FIFO that a reader holds open (as torch's
// monitor thread does) gets one byte; one without a reader says so; a
// regular file, a link to a FIFO and another stem's FIFO are not touched.
func TestAskDumps(t *testing.T) {
	dir := t.TempDir()
	stem := filepath.Join(dir, "fr-pipe-")
	mkfifo := func(name string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, unix.Mkfifo(p, 0o600))
		return p
	}
	read0 := mkfifo("fr-pipe-0.pipe")
	r0, err := os.OpenFile(read0, os.O_RDONLY|unix.O_NONBLOCK, 0)
	require.NoError(t, err)
	defer r0.Close()
	read12 := mkfifo("fr-pipe-12.pipe")
	r12, err := os.OpenFile(read12, os.O_RDONLY|unix.O_NONBLOCK, 0)
	require.NoError(t, err)
	defer r12.Close()
	mkfifo("fr-pipe-3.pipe") // no reader
	mkfifo("other-4.pipe")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "fr-pipe-5.pipe"), nil, 0o600))
	require.NoError(t, os.Symlink(read0, filepath.Join(dir, "fr-pipe-6.pipe")))

	got := AskDumps(stem)
	require.Len(t, got, 3)
	assert.Equal(t, Pipe{Rank: 0, File: read0}, got[0])
	assert.Equal(t, 3, got[1].Rank)
	assert.Contains(t, got[1].Error, "no reader")
	assert.Equal(t, Pipe{Rank: 12, File: read12}, got[2])

	buf := make([]byte, 8)
	n, err := r0.Read(buf)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "rank 0 was asked once (a link named as a pipe is not one)")
	n, err = r12.Read(buf)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	b, err := os.ReadFile(filepath.Join(dir, "fr-pipe-5.pipe"))
	require.NoError(t, err)
	assert.Empty(t, b, "a regular file is not written")
}

// TestPokeOnlyFIFOs: a path that is no FIFO when opened (a rank's user
// swapped it after the listing) is not written.
func TestPokeOnlyFIFOs(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.pipe")
	require.NoError(t, os.WriteFile(p, []byte("keep"), 0o600))
	assert.ErrorContains(t, poke(p), "not a FIFO")
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	assert.Equal(t, "keep", string(b))
}

// TestRemovePipes: the ranks' FIFOs go; a regular file or a link of the
// same name stays.
func TestRemovePipes(t *testing.T) {
	dir := t.TempDir()
	stem := filepath.Join(dir, "p-")
	require.NoError(t, unix.Mkfifo(stem+"0.pipe", 0o600))
	require.NoError(t, unix.Mkfifo(stem+"7.pipe", 0o600))
	require.NoError(t, os.WriteFile(stem+"1.pipe", nil, 0o600))
	require.NoError(t, os.Symlink(stem+"0.pipe", stem+"2.pipe"))
	RemovePipes(stem)
	var left []string
	des, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, de := range des {
		left = append(left, de.Name())
	}
	assert.Equal(t, []string{"p-1.pipe", "p-2.pipe"}, left)
}

// TestPokeFullPipe: a pipe its reader never drains (the ranks' user can
// fill it) is not waited for: the write is one attempt.
func TestPokeFullPipe(t *testing.T) {
	p := filepath.Join(t.TempDir(), "r0.pipe")
	require.NoError(t, unix.Mkfifo(p, 0o600))
	r, err := os.OpenFile(p, os.O_RDONLY|unix.O_NONBLOCK, 0)
	require.NoError(t, err)
	defer r.Close()
	w, err := unix.Open(p, unix.O_WRONLY|unix.O_NONBLOCK, 0)
	require.NoError(t, err)
	defer unix.Close(w)
	chunk := make([]byte, 4096)
	for {
		if _, err := unix.Write(w, chunk); err != nil {
			require.ErrorIs(t, err, unix.EAGAIN)
			break
		}
	}
	assert.NoError(t, poke(p), "a full pipe: a dump is asked for already")
}

// TestPokeRefusesLinks: a link to a FIFO with a reader is not written.
func TestPokeRefusesLinks(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "r0.pipe")
	require.NoError(t, unix.Mkfifo(fifo, 0o600))
	r, err := os.OpenFile(fifo, os.O_RDONLY|unix.O_NONBLOCK, 0)
	require.NoError(t, err)
	defer r.Close()
	link := filepath.Join(dir, "r1.pipe")
	require.NoError(t, os.Symlink(fifo, link))
	assert.Error(t, poke(link))
	_, err = r.Read(make([]byte, 8))
	assert.Error(t, err, "nothing was written")
}

// TestAwaitDumps: a finished dump counts once its size held between two
// looks; a rank that writes none is waited for until the context ends.
func TestAwaitDumps(t *testing.T) {
	prefix := filepath.Join(t.TempDir(), "d_")
	require.NoError(t, os.WriteFile(prefix+"0", []byte("dump"), 0o600))
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	assert.Equal(t, []int{0}, AwaitDumps(ctx, prefix, []int{3, 0, 0}))
	assert.Error(t, ctx.Err(), "rank 3 was waited for to the end")
}
