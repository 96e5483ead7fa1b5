package safefile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// noOpenat2 is set when the walk is to be used (tests), or once openat2
// was found missing (ENOSYS) or filtered (EPERM, as a seccomp filter
// answers).
var noOpenat2 atomic.Bool

const readFlags = unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_NOCTTY | unix.O_CLOEXEC

// Open opens path for reading if it is a regular file reached without a
// symbolic link (ErrSymlink), never blocking; a FIFO, device or directory
// is ErrNotRegular. A relative path is taken from the working directory.
func Open(path string) (*os.File, error) {
	pfd, err := look(path)
	if err != nil {
		return nil, err
	}
	return openLooked(pfd, path)
}

// look opens path (relative: from the working directory) as an O_PATH
// descriptor, following no symbolic link on the way, a last one included.
func look(path string) (int, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return -1, fmt.Errorf("open %q: %w", path, err)
	}
	pfd, err := openNoSymlinks(abs, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("open %q: %w", path, err)
	}
	return pfd, nil
}

// OpenFollow is Open for a path whose symbolic links are followed, as
// execve follows them (CMD's executable, which /usr/bin/python3 reaches
// through links): a regular file only, never blocking.
func OpenFollow(path string) (*os.File, error) {
	pfd, err := openRetry(path, unix.O_PATH|unix.O_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("open %q: %w", path, err)
	}
	return openLooked(pfd, path)
}

// OpenFIFO opens path for writing if it is a FIFO reached without a
// symbolic link (ErrSymlink; anything else is ErrNotFIFO), never
// blocking: without a reader it fails with ENXIO, as open(2) does.
func OpenFIFO(path string) (*os.File, error) {
	pfd, err := look(path)
	if err != nil {
		return nil, err
	}
	return openKind(pfd, path, unix.S_IFIFO, ErrNotFIFO, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC)
}

// openLooked opens for reading the file that pfd, an O_PATH descriptor
// (closed here), looks at, when it is a regular file (openKind).
func openLooked(pfd int, path string) (*os.File, error) {
	return openKind(pfd, path, unix.S_IFREG, ErrNotRegular, readFlags&^unix.O_NOFOLLOW)
}

// openKind opens with flags the file that pfd, an O_PATH descriptor
// (closed here), looks at, when it is of type kind (else notKind): only
// then is it opened, through pfd, so that a device's driver is never
// asked to open (a serial line's DTR, a watchdog, a tape's rewind), a
// FIFO opened for reading cannot block, and nothing can be swapped in
// between the look and the open.
func openKind(pfd int, path string, kind uint32, notKind error, flags int) (*os.File, error) {
	defer unix.Close(pfd)
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		return nil, fmt.Errorf("fstat %q: %w", path, err)
	}
	switch st.Mode & unix.S_IFMT {
	case kind:
	case unix.S_IFLNK: // O_PATH|O_NOFOLLOW on a link looks at the link
		return nil, fmt.Errorf("open %q: %w", path, ErrSymlink)
	default:
		return nil, fmt.Errorf("open %q: %w", path, notKind)
	}
	fd, err := openRetry("/proc/self/fd/"+strconv.Itoa(pfd), flags)
	if err != nil {
		return nil, fmt.Errorf("open %q: %w", path, err)
	}
	return os.NewFile(uintptr(fd), path), nil
}

// openRetry is open(2) retried on EINTR.
func openRetry(path string, flags int) (int, error) {
	for {
		fd, err := unix.Open(path, flags, 0)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// openNoSymlinks opens the absolute path abs with flags, following no
// symbolic link on the way.
func openNoSymlinks(abs string, flags int) (int, error) {
	if !noOpenat2.Load() {
		fd, err := unix.Openat2(unix.AT_FDCWD, abs, &unix.OpenHow{Flags: uint64(flags), Mode: 0,
			Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS})
		switch {
		case err == nil:
			return fd, nil
		case errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EPERM):
			noOpenat2.Store(true)
		case errors.Is(err, unix.ELOOP):
			return -1, ErrSymlink
		default:
			return -1, err
		}
	}
	dir, base := filepath.Split(filepath.Clean(abs))
	dfd, err := openDir(dir)
	if err != nil {
		return -1, err
	}
	defer unix.Close(dfd)
	fd, err := unix.Openat(dfd, base, flags, 0)
	if errors.Is(err, unix.ELOOP) {
		return -1, ErrSymlink
	}
	return fd, err
}

// openDir opens the absolute directory dir (O_PATH) one component at a
// time, refusing a component that is a symbolic link.
func openDir(dir string) (int, error) {
	dfd, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	for _, c := range strings.Split(strings.Trim(filepath.Clean(dir), "/"), "/") {
		if c == "" {
			continue
		}
		nfd, err := unix.Openat(dfd, c, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			var st unix.Stat_t
			if errors.Is(err, unix.ENOTDIR) && unix.Fstatat(dfd, c, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
				err = ErrSymlink
			}
			unix.Close(dfd)
			return -1, err
		}
		unix.Close(dfd)
		dfd = nfd
	}
	return dfd, nil
}

// Tail returns a reader of at most max bytes at the end of f: the whole
// file when it is not longer, else its last max bytes from the first
// complete line in them. It reads through f's current size only.
func Tail(f *os.File, max int64) (io.Reader, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() <= max {
		return io.LimitReader(f, max), nil
	}
	if _, err := f.Seek(fi.Size()-max, io.SeekStart); err != nil {
		return nil, err
	}
	return &tailReader{r: io.LimitReader(f, max)}, nil
}

// As calls fn on an OS thread of its own whose filesystem uid, gid and
// supplementary groups are cred's (nil: ncclrun's own, fn still runs on a
// thread of its own). Changing them drops the thread's file capabilities
// (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, ...) when the uid leaves 0, so
// the kernel checks each open as it would for cred's user. The thread is
// never given back to the Go scheduler: it ends with fn. The returned
// channel gets fn's error, or the error switching credentials (fn is then
// not called), and is closed after.
func As(cred *Cred, fn func() error) <-chan error {
	done := make(chan error, 1)
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread exits with this goroutine
		if cred != nil {
			if err := setFSCred(*cred); err != nil {
				done <- err
				return
			}
		}
		done <- fn()
	}()
	return done
}

// setFSCred sets the calling thread's groups, fsgid and fsuid (raw system
// calls: only this thread).
func setFSCred(c Cred) error {
	if c.UID == uint32(os.Geteuid()) && c.GID == uint32(os.Getegid()) {
		return nil // CMD's ids are ncclrun's: nothing to change (and no privilege to change groups)
	}
	var p unsafe.Pointer
	if len(c.Groups) > 0 {
		p = unsafe.Pointer(&c.Groups[0])
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, uintptr(len(c.Groups)), uintptr(p), 0); e != 0 {
		return fmt.Errorf("setgroups: %w", e)
	}
	// setfsgid/setfsuid report no error: they return the previous id, and
	// an id given again returns the one in force.
	unix.RawSyscall(unix.SYS_SETFSGID, uintptr(c.GID), 0, 0)
	if r, _, _ := unix.RawSyscall(unix.SYS_SETFSGID, uintptr(c.GID), 0, 0); uint32(r) != c.GID {
		return fmt.Errorf("setfsgid %d: refused", c.GID)
	}
	unix.RawSyscall(unix.SYS_SETFSUID, uintptr(c.UID), 0, 0)
	if r, _, _ := unix.RawSyscall(unix.SYS_SETFSUID, uintptr(c.UID), 0, 0); uint32(r) != c.UID {
		return fmt.Errorf("setfsuid %d: refused", c.UID)
	}
	return nil
}

// WriteFile writes data to path with perm: a new temporary file in path's
// directory, reached without following a symbolic link, renamed over path
// (a hard link planted at path is replaced, never written through). A
// symbolic link at path is ErrLinkKept, and an existing path that is not a
// regular file ErrNotRegular; both are left alone (a link planted between
// that look and the rename is replaced, not followed). Where the directory cannot take the temporary file or the
// rename (EACCES, EROFS: a non-root user and /dev; EBUSY, EXDEV: a
// bind-mounted file such as Kubernetes' /dev/termination-log), path itself
// is opened without following a link, checked to be a regular file and
// overwritten.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	dir, base := filepath.Split(filepath.Clean(abs))
	dfd, err := openDirNoSymlinks(dir)
	if err != nil {
		return fmt.Errorf("write %q: %w", path, err)
	}
	defer unix.Close(dfd)
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil {
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
		case unix.S_IFLNK:
			return fmt.Errorf("write %q: %w", path, ErrLinkKept)
		default:
			// A device, FIFO, socket or directory is never replaced
			// (root renaming over /dev/full would destroy it).
			return fmt.Errorf("write %q: %w", path, ErrNotRegular)
		}
	}
	err = renameInto(dfd, base, path, data, perm)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EROFS), errors.Is(err, unix.EBUSY), errors.Is(err, unix.EXDEV):
		werr := writeInPlace(dfd, base, path, data)
		if errors.Is(werr, unix.ENOENT) {
			return err // nothing to overwrite: why no new file could be made
		}
		return werr
	default:
		return err
	}
}

func openDirNoSymlinks(dir string) (int, error) {
	if !noOpenat2.Load() {
		fd, err := unix.Openat2(unix.AT_FDCWD, dir, &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS})
		switch {
		case err == nil:
			return fd, nil
		case errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EPERM):
			noOpenat2.Store(true)
		case errors.Is(err, unix.ELOOP):
			return -1, fmt.Errorf("open %q: %w", dir, ErrSymlink)
		default:
			return -1, fmt.Errorf("open %q: %w", dir, err)
		}
	}
	fd, err := openDir(dir)
	if err != nil {
		return -1, fmt.Errorf("open %q: %w", dir, err)
	}
	return fd, nil
}

// renameInto and writeInPlace name path, the path as given, in their errors.
func renameInto(dfd int, base, path string, data []byte, perm os.FileMode) error {
	var tmp string
	var fd int
	var err error
	for i := 0; i < 100; i++ {
		tmp = "." + base + ".tmp" + strconv.FormatInt(time.Now().UnixNano()+int64(i), 36)
		fd, err = unix.Openat(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(perm.Perm()))
		if !errors.Is(err, unix.EEXIST) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("create a temporary file for %q: %w", path, err)
	}
	f := os.NewFile(uintptr(fd), tmp)
	_, werr := f.Write(data)
	if werr == nil {
		werr = unix.Fchmod(fd, uint32(perm.Perm())) // the umask must not narrow it
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = unix.Renameat(dfd, tmp, dfd, base)
	}
	if werr != nil {
		_ = unix.Unlinkat(dfd, tmp, 0)
		return fmt.Errorf("write %q: %w", path, werr)
	}
	return nil
}

func writeInPlace(dfd int, base, path string, data []byte) error {
	fd, err := unix.Openat(dfd, base, unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ELOOP) {
		err = ErrSymlink
	}
	if err != nil {
		return fmt.Errorf("open %q: %w", path, err)
	}
	f := os.NewFile(uintptr(fd), base)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("fstat %q: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("write %q: %w", path, ErrNotRegular)
	}
	if err := unix.Ftruncate(fd, 0); err != nil {
		return fmt.Errorf("truncate %q: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("write %q: %w", path, err)
	}
	return nil
}
