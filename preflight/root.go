package preflight

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
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
// root the tree is untrusted input (a snapshot someone sent in): symbolic
// links are resolved and must stay inside the tree (those under proc/,
// sys/ and dev/ inside that directory, as real sysfs links do); only
// regular files are opened, with O_NONBLOCK|O_NOFOLLOW, and read with a
// size bound; each bad file gives one warning.
type sysRoot struct {
	dir  string
	live bool
	t    *treeState // nil on the live system
}

// treeState is what the readers of one Run share under a tree root.
type treeState struct {
	real     string          // dir with its own links resolved
	warned   map[string]bool // rel paths warned about
	warnings []string
	rec      func(Read) // non-nil while Record runs
}

func newRoot(root string) sysRoot {
	if root == "" || root == "/" {
		return sysRoot{dir: "/", live: true}
	}
	return newTree(root)
}

// newTree reads dir as a tree, even "/" (Record reads the live system so).
func newTree(dir string) sysRoot {
	t := &treeState{real: dir, warned: map[string]bool{}}
	if r, err := filepath.EvalSymlinks(dir); err == nil {
		t.real = r
	}
	return sysRoot{dir: dir, t: t}
}

// path joins rel (slash separated, relative) to the root.
func (s sysRoot) path(rel string) string {
	return filepath.Join(s.dir, filepath.FromSlash(rel))
}

// resolve returns the real path of rel under a tree root, refusing one
// whose links lead out of its area (ErrOutside).
func (s sysRoot) resolve(rel string) (string, error) {
	p := s.path(rel)
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", err
	}
	area := s.t.real
	if first, _, _ := strings.Cut(rel, "/"); first == "proc" || first == "sys" || first == "dev" {
		area = filepath.Join(s.t.real, first)
	}
	if !within(area, real) {
		return "", fmt.Errorf("links to %q, %w", real, ErrOutside)
	}
	return real, nil
}

// within reports whether p is dir or below it.
func within(dir, p string) bool {
	r, err := filepath.Rel(dir, p)
	return err == nil && r != ".." && !strings.HasPrefix(r, "../") && !filepath.IsAbs(r)
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

// openTree opens rel under a tree root: resolved within the tree, a
// regular file, never blocking, following no link.
func (s sysRoot) openTree(rel string) (*os.File, error) {
	real, err := s.resolve(rel)
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(real)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w (%s)", ErrNotRegular, kindOf(fi.Mode()))
	}
	f, err := os.OpenFile(real, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
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
	dir := s.path(rel)
	if s.t != nil {
		if dir, err = s.resolve(rel); err != nil {
			return nil, nil, err
		}
		fi, err := os.Stat(dir)
		if err != nil {
			return nil, nil, err
		}
		if !fi.IsDir() {
			return nil, nil, fmt.Errorf("not a directory (%s)", kindOf(fi.Mode()))
		}
	}
	all, err := readDirNames(dir)
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
			fi, err := os.Stat(filepath.Join(dir, n))
			dirs = append(dirs, err == nil && fi.IsDir())
		}
	}
	return names, dirs, nil
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
	real, err := s.resolve(rel)
	var fi fs.FileInfo
	if err == nil {
		fi, err = os.Stat(real)
	}
	s.warn(rel, err)
	s.record(Read{Rel: rel, Kind: ReadExists, Err: err, Dirs: []bool{err == nil && fi.IsDir()}})
	return err == nil
}

// statfsSize is the size of the filesystem holding rel; it is not a file,
// so Record has nothing to copy (a snapshot cannot carry it).
func (s sysRoot) statfsSize(rel string) (int64, error) {
	p := s.path(rel)
	if s.t != nil {
		real, err := s.resolve(rel)
		if err != nil {
			s.warn(rel, err)
			return 0, err
		}
		p = real
	}
	return statfsSize(p)
}

// record hands r to Record's callback, if one is running.
func (s sysRoot) record(r Read) {
	if s.t != nil && s.t.rec != nil {
		s.t.rec(r)
	}
}
