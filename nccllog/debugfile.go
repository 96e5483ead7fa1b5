package nccllog

import (
	"os"
	"path/filepath"
	"strings"
	"time"
)

// maxDebugFiles bounds how many NCCL_DEBUG_FILE files are read at exit.
const maxDebugFiles = 4096

// DebugFiles returns the files NCCL wrote its log to, when
// NCCL_DEBUG_FILE sends it away from stdout (docs/research/nccl-messages.md §7: %h is the
// host name up to its first dot, %p the pid, %% a percent sign): the
// pattern's matches that are regular files modified at or after since, at
// most maxDebugFiles of them. NCCL's WARN lines never reach CMD's output
// then, so these files are read after CMD exits (ExitFiles).
func DebugFiles(pattern string, since time.Time) []string {
	if pattern == "" {
		return nil
	}
	host, _ := os.Hostname()
	if i := strings.IndexByte(host, '.'); i >= 0 {
		host = host[:i] // NCCL cuts the host name at the first dot
	}
	var g strings.Builder
	for i := 0; i < len(pattern); i++ {
		c := pattern[i]
		if c == '%' && i+1 < len(pattern) {
			switch pattern[i+1] {
			case 'h':
				g.WriteString(globEscape(host))
				i++
				continue
			case 'p':
				g.WriteString("*")
				i++
				continue
			case '%':
				g.WriteString("%")
				i++
				continue
			}
		}
		g.WriteString(globEscape(string(c)))
	}
	matches, err := filepath.Glob(g.String())
	if err != nil {
		return nil
	}
	var files []string
	for _, p := range matches {
		fi, err := os.Stat(p)
		if err != nil || !fi.Mode().IsRegular() || fi.ModTime().Before(since) {
			continue
		}
		files = append(files, p)
		if len(files) == maxDebugFiles {
			break
		}
	}
	return files
}

// globEscape quotes the characters filepath.Match treats as special.
func globEscape(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`)
	return r.Replace(s)
}
