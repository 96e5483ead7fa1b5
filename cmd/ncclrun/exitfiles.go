package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ncclrun/ncclrun/internal/safefile"
	"github.com/ncclrun/ncclrun/launcher"
)

// Bounds on what run reads after CMD exited (README "Reliability"; every
// file named here could have been replaced by CMD).
const (
	// debugFileTail is how much of each NCCL_DEBUG_FILE file is read: its
	// last 8 MiB (NCCL's WARN lines come last), from the first whole line.
	debugFileTail = 8 << 20
	// debugFilesTotal is how much of all of them together is read.
	debugFilesTotal = 64 << 20
	// torchFileMax is the largest torchrun error file parsed (one
	// exception with its traceback: a few KiB in practice).
	torchFileMax = 1 << 20
	// exitReadTimeout bounds the whole reading: a slow or hung file
	// system does not hold the exit status back for long.
	exitReadTimeout = 5 * time.Second
	// maxExitWarnings is how many files not read are named one by one.
	maxExitWarnings = 5
)

// errStopped ends the reading early (deadline, signal).
var errStopped = errors.New("stopped")

// exitFiles are the files run reads once CMD has exited.
type exitFiles struct {
	cred      *launcher.User // CMD's user; nil when it is ncclrun's
	pattern   string         // NCCL_DEBUG_FILE, "" for none
	torchFile string         // torchrun's error file, "" for none
	since     time.Time      // files older than CMD are not CMD's
}

// exitReads is what reading them gave.
type exitReads struct {
	torch []byte   // torchrun's error file, nil when not read
	warns []string // one line each, without "ncclrun: "
}

// read reads the files as CMD's user (safefile.As), each one only if it is
// a regular file reached without a symbolic link, with the bounds above.
// NCCL_DEBUG_FILE's files are streamed into feed. A terminating signal on
// term or the deadline stops the reading; CMD's exit status is never at
// stake, what was read until then is kept.
func (x exitFiles) read(feed func(io.Reader), term <-chan os.Signal) exitReads {
	var (
		mu  sync.Mutex
		out exitReads
	)
	warn := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		out.warns = append(out.warns, fmt.Sprintf(format, args...))
	}
	var cred *safefile.Cred
	if x.cred != nil {
		cred = &safefile.Cred{UID: x.cred.UID, GID: x.cred.GID, Groups: x.cred.Groups}
	}
	pr, pw := io.Pipe()
	torch := make(chan []byte, 1)
	done := safefile.As(cred, func() error {
		defer pw.Close()
		if x.torchFile != "" {
			b, err := readSmall(x.torchFile, x.since, torchFileMax)
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				warn("torchrun error file %s not read: %v", x.torchFile, cause(err))
			}
			torch <- b
		}
		if x.pattern == "" {
			return nil
		}
		var total int64
		for _, f := range ncclDebugFiles(x.pattern, x.since) {
			if total >= debugFilesTotal {
				warn("NCCL_DEBUG_FILE: read %d MiB of files; the rest is not read", debugFilesTotal>>20)
				break
			}
			fh, err := safefile.Open(f)
			if err != nil {
				warn("NCCL_DEBUG_FILE %s not read: %v", f, cause(err))
				continue
			}
			r, err := safefile.Tail(fh, min(debugFileTail, debugFilesTotal-total))
			var n int64
			if err == nil {
				n, err = io.Copy(pw, r)
			}
			fh.Close()
			total += n
			if _, werr := pw.Write([]byte{'\n'}); werr != nil || errors.Is(err, errStopped) {
				return nil // the reader stopped, and said why
			}
			if err != nil {
				warn("NCCL_DEBUG_FILE %s: %v", f, cause(err))
			}
		}
		return nil
	})
	fed := make(chan struct{})
	go func() { feed(pr); _, _ = io.Copy(io.Discard, pr); close(fed) }()
	deadline := time.NewTimer(exitReadTimeout)
	defer deadline.Stop()
	for finished := false; !finished; {
		select {
		case <-fed:
			finished = true
		case err, ok := <-done:
			if ok && err != nil { // fn was not called: the credentials could not be switched
				warn("cannot read files as CMD's user: %v", err)
				pw.CloseWithError(err)
			}
			done = nil
		case <-deadline.C:
			warn("reading CMD's log files took over %v; the rest is not read", exitReadTimeout)
			pr.CloseWithError(errStopped)
		case sig := <-term:
			warn("%s received; CMD's log files are not read further", unix.SignalName(sig.(syscall.Signal)))
			pr.CloseWithError(errStopped)
		}
	}
	select {
	case out.torch = <-torch:
	default:
	}
	mu.Lock()
	defer mu.Unlock()
	return exitReads{torch: out.torch, warns: append([]string(nil), out.warns...)}
}

// readSmall reads a whole small file, if it is regular, reached without
// a link, at most max bytes long and modified since since.
func readSmall(path string, since time.Time, max int64) ([]byte, error) {
	f, err := safefile.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.ModTime().Before(since) {
		return nil, nil // left by an earlier run
	}
	if fi.Size() > max {
		return nil, fmt.Errorf("%d bytes, over the %d KiB ncclrun reads", fi.Size(), max>>10)
	}
	return io.ReadAll(io.LimitReader(f, max))
}

// cause is err without the path safefile already put in front.
func cause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	if u := errors.Unwrap(err); u != nil && strings.HasPrefix(err.Error(), "open ") {
		return u
	}
	return err
}

// printExitWarnings prints the first maxExitWarnings warnings and how many
// more there were.
func printExitWarnings(e *env, warns []string) {
	for i, w := range warns {
		if i == maxExitWarnings {
			fprintf(e.stderr, "ncclrun: warning: %d more files not read\n", len(warns)-i)
			return
		}
		fprintf(e.stderr, "ncclrun: warning: %s\n", w)
	}
}

// pinDir returns path with its directory's symbolic links resolved now,
// before CMD runs: a link there is the user's own choice (/var/run ->
// /run), one that appears later is not followed (safefile). A directory
// that cannot be resolved yet is kept as given.
func pinDir(path string) string {
	if path == "" {
		return ""
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	if strings.ContainsAny(dir, "%*?[") {
		return path // NCCL_DEBUG_FILE's %h, %p in the directory: resolved per file, without links
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return path
	}
	if abs, err := filepath.Abs(real); err == nil {
		real = abs
	}
	return filepath.Join(real, base)
}
