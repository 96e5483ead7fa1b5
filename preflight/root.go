package preflight

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// maxAttr bounds the single read of a sysfs or procfs attribute: some
// drivers make a read-until-EOF loop spin, so attributes are read once.
const maxAttr = 4096

// maxFile bounds whole-file reads of proc files that are read to the end
// (status, limits, mountinfo, passwd).
const maxFile = 4 << 20

// Errors of reading a tree (Options.Root other than "/"), matched with
// errors.Is; each makes one warning in Report.Warnings.
var (
	// ErrNotRegular: the path is a FIFO, a device, a socket or a directory
	// where a file was expected; it is never opened.
	ErrNotRegular = errors.New("not a regular file")
	// ErrOutside: the path's symbolic links lead out of the tree (or, under
	// proc/, sys/ and dev/, out of that directory).
	ErrOutside = errors.New("outside the tree")
)

// sysRoot is the directory facts are read under.
//
// On the live system ("/") files are opened as they are. Under any other
// root the tree is untrusted input (a snapshot someone sent in): it is
// read only through an os.Root, which follows symbolic links but refuses
// a path whose links lead out of the tree (an absolute link included);
// those under proc/, sys/ and dev/ are read through an os.Root of that
// directory, so their links stay inside it, as real sysfs links do. Only
// regular files are opened, with O_NONBLOCK, and read with a size bound;
// each bad file gives one warning.
type sysRoot struct {
	dir  string
	live bool
	t    *treeState // nil on the live system
}

// treeState is what the readers of one Run share under a tree root.
type treeState struct {
	fs       treeFS // where rel paths are opened
	fsErr    error  // why the tree cannot be opened (it is not there)
	areas    map[string]area
	warned   map[string]bool // rel paths warned about
	warnings []string
	rec      func(Read) // non-nil while Record runs
}

// treeFS is what a tree's files are opened and statted through: an
// *os.Root, or slash.
type treeFS interface {
	Stat(name string) (fs.FileInfo, error)
	OpenFile(name string, flag int, perm fs.FileMode) (*os.File, error)
}

// slash is the live system read as a tree (Record of "/"): plain paths.
// Nothing is outside "/", so there is nothing to confine, and an absolute
// link (Debian's /var/run -> /run) is followed as on the live system.
type slash struct{}

func (slash) Stat(name string) (fs.FileInfo, error) { return os.Stat("/" + name) }
func (slash) OpenFile(name string, flag int, perm fs.FileMode) (*os.File, error) {
	return os.OpenFile("/"+name, flag, perm)
}

// area is the os.Root of proc/, sys/ or dev/ in a tree, or why it cannot
// be opened.
type area struct {
	fs  treeFS
	err error
}

func newRoot(root string) sysRoot {
	if root == "" || root == "/" {
		return sysRoot{dir: "/", live: true}
	}
	return newTree(root)
}

// newTree reads dir as a tree, even "/" (Record reads the live system so).
func newTree(dir string) sysRoot {
	t := &treeState{warned: map[string]bool{}, areas: map[string]area{}}
	if filepath.Clean(dir) == "/" {
		t.fs = slash{}
	} else if r, err := os.OpenRoot(dir); err == nil {
		t.fs = r
	} else {
		t.fsErr = err
	}
	return sysRoot{dir: dir, t: t}
}

// close releases the tree's os.Roots.
func (s sysRoot) close() {
	if s.t == nil {
		return
	}
	for _, a := range s.t.areas {
		if r, ok := a.fs.(*os.Root); ok {
			r.Close()
		}
	}
	if r, ok := s.t.fs.(*os.Root); ok {
		r.Close()
	}
}

// path joins rel (slash separated, relative) to the root.
func (s sysRoot) path(rel string) string {
	return filepath.Join(s.dir, filepath.FromSlash(rel))
}

// in returns what rel is opened through under a tree root, and its name
// there: the os.Root of proc/, sys/ or dev/ for a path below one of them
// (opened on first use), else the tree's.
func (s sysRoot) in(rel string) (treeFS, string, error) {
	t := s.t
	if t.fsErr != nil {
		return nil, "", t.fsErr
	}
	first, rest, _ := strings.Cut(rel, "/")
	r, ok := t.fs.(*os.Root)
	if !ok || first != "proc" && first != "sys" && first != "dev" {
		return t.fs, rel, nil
	}
	a, ok := t.areas[first]
	if !ok {
		sub, err := r.OpenRoot(first)
		a = area{err: err}
		if err == nil {
			a.fs = sub
		}
		t.areas[first] = a
	}
	if a.err != nil {
		return nil, "", s.outside(first, a.err)
	}
	if rest == "" {
		rest = "."
	}
	return a.fs, rest, nil
}

// stat is os.Stat of rel under a tree root, through its os.Root.
func (s sysRoot) stat(rel string) (fs.FileInfo, error) {
	f, name, err := s.in(rel)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat(name)
	return fi, s.outside(rel, err)
}

// openAt opens rel under a tree root with flag, through its os.Root.
func (s sysRoot) openAt(rel string, flag int) (*os.File, error) {
	root, name, err := s.in(rel)
	if err != nil {
		return nil, err
	}
	f, err := root.OpenFile(name, flag|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, s.outside(rel, err)
	}
	return f, nil
}

// outside is err, or for an os.Root's refusal of a path whose links lead
// out of it, an error that wraps ErrOutside and, when rel itself is the
// link, says where it points.
func (s sysRoot) outside(rel string, err error) error {
	var pe *fs.PathError
	if !errors.As(err, &pe) || pe.Err.Error() != "path escapes from parent" { // os.Root's error, not exported
		return err
	}
	if r, ok := s.t.fs.(*os.Root); ok {
		if to, lerr := r.Readlink(rel); lerr == nil {
			return fmt.Errorf("links to %q, %w", to, ErrOutside)
		}
	}
	return fmt.Errorf("a link on its path leads %w", ErrOutside)
}

// warn records one warning for rel, unless err says only that it does not
// exist (absent files are normal in a tree).
func (s sysRoot) warn(rel string, err error) {
	if err != nil && !absent(err) {
		s.note(rel, fmt.Sprintf("%v; not read", err))
	}
}

// note records warning text for rel, once per path.
func (s sysRoot) note(rel, text string) {
	if s.t == nil || s.t.warned[rel] {
		return
	}
	s.t.warned[rel] = true
	s.t.warnings = append(s.t.warnings, rel+": "+text)
}

// absent reports whether err says that a path does not exist.
func absent(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// openTree opens rel under a tree root: through its os.Root, a regular
// file, never blocking.
func (s sysRoot) openTree(rel string) (*os.File, error) {
	fi, err := s.stat(rel)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w (%s)", ErrNotRegular, kindOf(fi.Mode()))
	}
	f, err := s.openAt(rel, os.O_RDONLY|syscall.O_NONBLOCK)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%w (changed while opened)", ErrNotRegular)
	}
	return f, nil
}

// kindOf names a file type for a warning.
func kindOf(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return "not a plain file"
}

// open opens rel for reading: plainly on the live system, with openTree's
// rules under a tree.
func (s sysRoot) open(rel string) (*os.File, error) {
	if s.t == nil {
		return os.Open(s.path(rel))
	}
	return s.openTree(rel)
}

// readAttr reads a small attribute with one bounded read and trims it.
func (s sysRoot) readAttr(rel string) (string, error) {
	b, err := s.readBounded(rel, ReadAttr)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// readFile reads a whole file, up to maxFile bytes (under a tree, a longer
// file is cut there with a warning).
func (s sysRoot) readFile(rel string) ([]byte, error) {
	return s.readBounded(rel, ReadFile)
}

// readConf is readFile for an NCCL configuration file (Record tells them
// apart: a snapshot keeps only their NCCL_ lines).
func (s sysRoot) readConf(rel string) ([]byte, error) {
	return s.readBounded(rel, ReadConf)
}

func (s sysRoot) readBounded(rel string, kind ReadKind) ([]byte, error) {
	data, err := s.readRaw(rel, kind)
	s.warn(rel, err)
	s.record(Read{Rel: rel, Kind: kind, Data: data, Err: err})
	if err != nil {
		return nil, fmt.Errorf("read %q: %w", s.path(rel), err)
	}
	return data, nil
}

func (s sysRoot) readRaw(rel string, kind ReadKind) ([]byte, error) {
	if s.t == nil {
		limit := maxFile
		if kind == ReadAttr {
			limit = maxAttr
		}
		return readLive(s.path(rel), limit, kind == ReadAttr)
	}
	f, err := s.open(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if kind == ReadAttr {
		buf := make([]byte, maxAttr)
		n, err := f.Read(buf)
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		return buf[:n], nil
	}
	limit := int64(maxFile)
	if s.t != nil {
		limit++ // one byte more tells a cut file
	}
	b, err := io.ReadAll(io.LimitReader(f, limit))
	if err != nil {
		return nil, err
	}
	if len(b) > maxFile {
		b = b[:maxFile]
		s.note(rel, fmt.Sprintf("larger than %d bytes; only the first %d read", maxFile, maxFile))
	}
	return b, nil
}

// readLive is readRaw on the live system, with plain system calls: os.Open
// registers every file with the poller (five fcntl and epoll_ctl calls for
// a /proc or /sys file, which cannot be polled) and io.ReadAll starts with
// 512 bytes; a start reads about ten such files. It reads up to limit
// bytes (one read when once: a sysfs attribute), and its errors are the
// *fs.PathError values os.Open and os.File.Read return.
func readLive(path string, limit int, once bool) ([]byte, error) {
	var fd int
	var err error
	for {
		fd, err = syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer syscall.Close(fd)
	buf := make([]byte, min(limit, 4096))
	n := 0
	for n < limit {
		if n == len(buf) {
			buf = append(buf, make([]byte, min(len(buf), limit-len(buf)))...)
		}
		m, err := syscall.Read(fd, buf[n:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		if m <= 0 {
			break
		}
		n += m
		if once {
			break
		}
	}
	return buf[:n], nil
}

// list returns the sorted names in a directory, leaving out hidden entries
// (testdata trees keep otherwise empty directories with a .keep file) and,
// when keep is given, the names it refuses: Record copies only the names
// a reader uses.
func (s sysRoot) list(rel string, keep ...func(string) bool) ([]string, error) {
	names, dirs, err := s.listRaw(rel, keep)
	s.warn(rel, err)
	s.record(Read{Rel: rel, Kind: ReadDir, Names: names, Dirs: dirs, Err: err})
	if err != nil {
		return nil, fmt.Errorf("list %q: %w", s.path(rel), err)
	}
	return names, nil
}

func (s sysRoot) listRaw(rel string, keep []func(string) bool) (names []string, dirs []bool, err error) {
	var all []string
	if s.t == nil {
		all, err = readDirNames(s.path(rel))
	} else {
		all, err = s.readTreeDir(rel)
	}
	if err != nil {
		return nil, nil, err
	}
next:
	for _, n := range all {
		if strings.HasPrefix(n, ".") {
			continue
		}
		for _, k := range keep {
			if !k(n) {
				continue next
			}
		}
		names = append(names, n)
	}
	sort.Strings(names)
	if s.t != nil && s.t.rec != nil {
		for _, n := range names {
			fi, err := s.stat(path.Join(rel, n))
			dirs = append(dirs, err == nil && fi.IsDir())
		}
	}
	return names, dirs, nil
}

// readTreeDir is a directory's names under a tree root, unsorted, read
// through its os.Root.
func (s sysRoot) readTreeDir(rel string) ([]string, error) {
	fi, err := s.stat(rel)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("not a directory (%s)", kindOf(fi.Mode()))
	}
	f, err := s.openAt(rel, os.O_RDONLY|syscall.O_DIRECTORY)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

// readDirNames is a directory's names, unsorted, read as readLive reads
// files: with plain system calls (os.Open registers a directory with the
// poller too) and 32 KiB at a time (os.File reads 8 KiB: a library
// directory of ~1,700 names took ten calls), and no fs.DirEntry made for
// each of the ~100 names of /dev that the GPU check lists to keep two.
// Its errors are the *fs.PathError values of os.Open and Readdirnames.
func readDirNames(dir string) ([]string, error) {
	var fd int
	var err error
	for {
		fd, err = syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	defer syscall.Close(fd)
	buf := make([]byte, 32<<10)
	var names []string
	for {
		n, err := syscall.ReadDirent(fd, buf)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "readdirent", Path: dir, Err: err}
		}
		if n <= 0 {
			return names, nil
		}
		_, _, names = syscall.ParseDirent(buf[:n], -1, names)
	}
}

// exists reports whether rel exists (following links, within the tree
// under a tree root). Nothing is opened.
func (s sysRoot) exists(rel string) bool {
	if s.t == nil {
		_, err := os.Stat(s.path(rel))
		return err == nil
	}
	fi, err := s.stat(rel)
	s.warn(rel, err)
	s.record(Read{Rel: rel, Kind: ReadExists, Err: err, Dirs: []bool{err == nil && fi.IsDir()}})
	return err == nil
}

// statfsSize is the size of the filesystem holding rel; it is not a file,
// so Record has nothing to copy (a snapshot cannot carry it). Under a tree
// root rel is opened through its os.Root only to name it (openPathFlag:
// no device is opened, nothing blocks) and its open file asked.
func (s sysRoot) statfsSize(rel string) (int64, error) {
	if s.t == nil {
		return statfsSize(s.path(rel))
	}
	f, err := s.openAt(rel, openPathFlag)
	if err != nil {
		s.warn(rel, err)
		return 0, err
	}
	defer f.Close()
	return fstatfsSize(f)
}

// record hands r to Record's callback, if one is running.
func (s sysRoot) record(r Read) {
	if s.t != nil && s.t.rec != nil {
		s.t.rec(r)
	}
}
