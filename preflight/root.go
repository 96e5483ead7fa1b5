package preflight

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// maxAttr bounds the single read of a sysfs or procfs attribute: some
// drivers make a read-until-EOF loop spin, so attributes are read once.
const maxAttr = 4096

// maxFile bounds whole-file reads of proc files that are read to the end
// (status, limits, mountinfo, passwd).
const maxFile = 4 << 20

// sysRoot is the directory facts are read under.
type sysRoot struct {
	dir  string
	live bool
}

func newRoot(root string) sysRoot {
	if root == "" || root == "/" {
		return sysRoot{dir: "/", live: true}
	}
	return sysRoot{dir: root}
}

// path joins rel (slash separated, relative) to the root.
func (s sysRoot) path(rel string) string {
	return filepath.Join(s.dir, filepath.FromSlash(rel))
}

// readAttr reads a small attribute with one bounded read and trims it.
func (s sysRoot) readAttr(rel string) (string, error) {
	p := s.path(rel)
	f, err := os.Open(p)
	if err != nil {
		return "", fmt.Errorf("read %q: %w", p, err)
	}
	defer f.Close()
	buf := make([]byte, maxAttr)
	n, err := f.Read(buf)
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("read %q: %w", p, err)
	}
	return strings.TrimSpace(string(buf[:n])), nil
}

// readFile reads a whole (bounded) file.
func (s sysRoot) readFile(rel string) ([]byte, error) {
	p := s.path(rel)
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("read %q: %w", p, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxFile))
	if err != nil {
		return nil, fmt.Errorf("read %q: %w", p, err)
	}
	return b, nil
}

// list returns the sorted names in a directory, leaving out hidden entries
// (testdata trees keep otherwise empty directories with a .keep file).
func (s sysRoot) list(rel string) ([]string, error) {
	p := s.path(rel)
	ents, err := os.ReadDir(p)
	if err != nil {
		return nil, fmt.Errorf("list %q: %w", p, err)
	}
	var names []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names, nil
}

// exists reports whether rel exists (following links).
func (s sysRoot) exists(rel string) bool {
	_, err := os.Stat(s.path(rel))
	return err == nil
}
