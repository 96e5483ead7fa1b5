package hang

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/ncclrun/ncclrun/internal/safefile"
)

// Pipe is one rank's flight-recorder pipe, asked for a dump.
type Pipe struct {
	Rank  int    `json:"rank"`
	File  string `json:"file"`
	Error string `json:"error,omitempty"`
}

// AskDumps asks every rank whose flight-recorder pipe is under stem (the
// job's TORCH_NCCL_DEBUG_INFO_PIPE_FILE) for a dump. torch (2.2+) makes
// the FIFO <stem><rank>.pipe for each rank and reads it from the rank's
// monitor thread: any byte written makes that rank dump its flight
// recorder where TORCH_FR_DUMP_TEMP_FILE says, while training goes on. A
// path in the directory is opened only as a FIFO, looked at before it is
// opened, without a link on the way and without blocking (no reader is
// ENXIO), since the ranks' user chose what is there.
// At most MaxDumps pipes are asked.
func AskDumps(stem string) []Pipe {
	dir, files := rankFiles(stem, ".pipe", isFIFO)
	var out []Pipe
	for i, f := range files {
		if i == MaxDumps {
			break
		}
		p := Pipe{Rank: f.rank, File: filepath.Join(dir, f.name)}
		if err := poke(p.File); err != nil {
			p.Error = err.Error()
		}
		out = append(out, p)
	}
	return out
}

// AwaitDumps waits, until ctx ends, for a dump of each of ranks at
// prefix (<prefix><rank>, as torch names them) whose size has stopped
// changing: torch writes its dump in place, so a file that grew between
// two looks is not finished. It returns the ranks whose dump is there, in
// order.
func AwaitDumps(ctx context.Context, prefix string, ranks []int) []int {
	ranks = slices.Compact(slices.Sorted(slices.Values(ranks)))
	size := map[int]int64{}
	done := map[int]bool{}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	look := func() {
		for _, r := range ranks {
			if done[r] {
				continue
			}
			st, err := os.Lstat(prefix + strconv.Itoa(r))
			if err != nil || !st.Mode().IsRegular() || st.Size() == 0 {
				continue
			}
			if old, ok := size[r]; ok && old == st.Size() {
				done[r] = true
			}
			size[r] = st.Size()
		}
	}
	for look(); len(done) < len(ranks); look() {
		select {
		case <-ctx.Done():
			return finished(ranks, done)
		case <-tick.C:
		}
	}
	return finished(ranks, done)
}

// finished is ranks, in order, that done holds.
func finished(ranks []int, done map[int]bool) []int {
	var out []int
	for _, r := range ranks {
		if done[r] {
			out = append(out, r)
		}
	}
	return out
}

// RemovePipes removes the ranks' pipes under stem, which torch leaves
// behind: in ncclrun's own evidence directory they would keep it from
// being removed when it holds nothing else.
func RemovePipes(stem string) {
	dir, files := rankFiles(stem, ".pipe", isFIFO)
	for _, f := range files {
		_ = os.Remove(filepath.Join(dir, f.name))
	}
}

func isFIFO(m fs.FileMode) bool { return m&fs.ModeNamedPipe != 0 }

// poke writes one byte to the FIFO at path (safefile.OpenFIFO: only a
// FIFO, reached without a link, looked at before it is opened).
func poke(path string) error {
	f, err := safefile.OpenFIFO(path)
	if errors.Is(err, syscall.ENXIO) {
		return errors.New("no reader: the rank's torch does not read its pipe (it exited, or is older than 2.2)")
	}
	if err != nil {
		return err
	}
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var werr error
	// One attempt: a full pipe (EAGAIN) is not waited for.
	if err := rc.Write(func(fd uintptr) bool {
		_, werr = syscall.Write(int(fd), []byte{'\n'})
		return true
	}); err != nil {
		return err
	}
	if errors.Is(werr, syscall.EAGAIN) {
		return nil // full: a dump is asked for already
	}
	return werr
}
