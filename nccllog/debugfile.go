package nccllog

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// maxDebugFiles bounds how many NCCL_DEBUG_FILE files are read at exit,
// and maxDebugEntries how many directory entries are looked at to find
// them: a pattern with %p in several directories ("/%p/%p/%p") must not
// walk the file system.
const (
	maxDebugFiles   = 4096
	maxDebugEntries = 1 << 16
)

// DebugFiles returns the files NCCL wrote its log to, when
// NCCL_DEBUG_FILE sends it away from stdout (docs/research/nccl-messages.md §7: %h is the
// host name up to its first dot, %p the pid, %% a percent sign): the
// pattern's matches that are regular files modified at or after since, at
// most maxDebugFiles of them, in name order. %p matches a pid (1 to 10
// digits), in the file name or in a directory; at most maxDebugEntries
// directory entries are read in all. NCCL's WARN lines never reach CMD's
// output then, so these files are read after CMD exits (ExitFiles).
func DebugFiles(pattern string, since time.Time) []string {
	if pattern == "" {
		return nil
	}
	host, _ := os.Hostname()
	if i := strings.IndexByte(host, '.'); i >= 0 {
		host = host[:i] // NCCL cuts the host name at the first dot
	}
	dir, comps := "", strings.Split(pattern, "/")
	if strings.HasPrefix(pattern, "/") {
		dir, comps = "/", comps[1:]
	}
	w := debugWalk{since: since, budget: maxDebugEntries}
	w.walk(dir, debugParts(comps, host))
	slices.Sort(w.files)
	return w.files
}

// debugPart is one path component of the pattern: a name, or, where it
// holds %p, the expression a directory entry must match.
type debugPart struct {
	name string
	re   *regexp.Regexp
}

// debugParts is the pattern's path components, each expanded once.
func debugParts(comps []string, host string) []debugPart {
	parts := make([]debugPart, len(comps))
	for i, c := range comps {
		if strings.Contains(c, "%p") {
			parts[i].re = regexp.MustCompile("^" + expandComponent(c, host, "[0-9]{1,10}") + "$")
		} else {
			parts[i].name = expandComponent(c, host, "")
		}
	}
	return parts
}

// debugWalk expands a pattern one path component at a time.
type debugWalk struct {
	since  time.Time
	budget int // directory entries left to read
	files  []string
}

func (w *debugWalk) walk(dir string, parts []debugPart) {
	for len(parts) > 0 && parts[0].re == nil {
		dir = filepath.Join(dir, parts[0].name)
		parts = parts[1:]
	}
	if len(parts) == 0 {
		w.keep(dir)
		return
	}
	d, err := os.Open(filepath.Join(dir, "."))
	if err != nil {
		return
	}
	defer d.Close()
	for w.budget > 0 && len(w.files) < maxDebugFiles {
		ents, err := d.ReadDir(min(w.budget, 1024))
		w.budget -= len(ents)
		for _, e := range ents {
			if parts[0].re.MatchString(e.Name()) {
				w.walk(filepath.Join(dir, e.Name()), parts[1:])
			}
		}
		if err != nil {
			return
		}
	}
}

// keep adds path when it is a regular file modified since the start.
func (w *debugWalk) keep(path string) {
	if len(w.files) == maxDebugFiles {
		return
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() && !fi.ModTime().Before(w.since) {
		w.files = append(w.files, path)
	}
}

// expandComponent is one path component of the pattern with %h, %% and
// %p replaced: %p by pid (a regular expression, with the rest quoted for
// it), or, when pid is "", the component is taken literally.
func expandComponent(c, host, pid string) string {
	quote := func(s string) string { return s }
	if pid != "" {
		quote = regexp.QuoteMeta
	}
	var b strings.Builder
	for i := 0; i < len(c); i++ {
		if c[i] == '%' && i+1 < len(c) {
			switch c[i+1] {
			case 'h':
				b.WriteString(quote(host))
				i++
				continue
			case 'p':
				b.WriteString(pid)
				i++
				continue
			case '%':
				b.WriteString(quote("%"))
				i++
				continue
			}
		}
		b.WriteString(quote(c[i : i+1]))
	}
	return b.String()
}
