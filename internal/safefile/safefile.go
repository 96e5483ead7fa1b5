// Package safefile opens and writes files whose path another, less trusted
// process could have prepared: the files ncclrun reads after CMD exited
// (NCCL_DEBUG_FILE's logs, torchrun's error file) and the ones it writes
// then (--report, the termination log). CMD may have replaced any of them,
// or a directory on the way, by a symbolic link, a FIFO or a device.
//
//   - Open follows no symbolic link in any component (openat2
//     RESOLVE_NO_SYMLINKS, or a walk with O_NOFOLLOW where openat2 is
//     missing or filtered) and returns regular files only: it looks first
//     (O_PATH) and opens only a regular file, through that look, so a
//     FIFO never blocks and a device is never opened. OpenFollow is the
//     same for a path whose links are followed, as execve follows them.
//   - As runs the opening on an OS thread of its own whose filesystem
//     credentials are CMD's (setfsuid, setfsgid, setgroups on that thread
//     only), so ncclrun running as root with --user reads only what CMD's
//     user may read.
//   - WriteFile writes a temporary file in the target's directory (opened
//     without following a link) and renames it over the target: a link
//     planted at the target is replaced, never followed.
//
// Bounds on how much is read are the caller's (LimitReader, Tail). Use it
// for files a less privileged process could have touched; plain os.Open
// is right for everything else.
package safefile

import (
	"errors"
	"io"
)

// Sentinel errors, matched with errors.Is.
var (
	// ErrSymlink means the path has a symbolic link in it.
	ErrSymlink = errors.New("a symbolic link in the path")
	// ErrNotRegular means the path is not a regular file (a FIFO, a
	// device, a directory, a socket).
	ErrNotRegular = errors.New("not a regular file")
	// ErrNotFIFO: OpenFIFO found something else.
	ErrNotFIFO = errors.New("not a FIFO")
	// ErrLinkKept means WriteFile found a symbolic link at the path and
	// left it as it is: writing through it is what a link a less
	// privileged process planted wants, and renaming over it would
	// destroy a link that was there before (/dev/stdout in a container).
	ErrLinkKept = errors.New("a symbolic link, not a regular file (left as it is)")
	// ErrUnsupported is returned outside Linux.
	ErrUnsupported = errors.New("safefile: supported on Linux only")
)

// Cred are the filesystem credentials As switches its thread to. A nil
// *Cred means ncclrun's own.
type Cred struct {
	UID, GID uint32
	Groups   []uint32
}

// tailReader is the last bytes of a file from the first line that starts
// in them: a line cut at the front is dropped.
type tailReader struct {
	r       io.Reader
	skipped bool
}

func (t *tailReader) Read(p []byte) (int, error) {
	for !t.skipped {
		n, err := t.r.Read(p)
		for i := 0; i < n; i++ {
			if p[i] == '\n' {
				t.skipped = true
				return copy(p, p[i+1:n]), err
			}
		}
		if err != nil {
			return 0, err
		}
	}
	return t.r.Read(p)
}
