package snapshot

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ncclrun/ncclrun/internal/lazy"
)

// Output is where a snapshot goes (`ncclrun snapshot --output`): a
// tarball file, a tarball on stdout, or a new or empty directory.
type Output struct {
	kind string // "tar" (file), "stdout" (tar.gz on stdout) or "dir"
	Path string // the file or directory; "" for stdout
	top  string // the directory name inside a tarball
}

// Mistakes in an Output that ParseOutput and Open report; the caller says
// which path they are about.
var (
	ErrName     = errors.New("a snapshot is FILE.tar.gz, FILE.tgz, - (stdout) or a directory")
	ErrNotDir   = errors.New("exists and is not a directory (a tarball must end in .tar.gz or .tgz)")
	ErrNotEmpty = errors.New("is a directory that is not empty")
)

var hostRe = &lazy.Regexp{Expr: `[^A-Za-z0-9._-]+`}

// defaultName is ncclrun-snapshot-<host>-<UTC date-time>.
func defaultName(now time.Time) string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	host = strings.Trim(hostRe.Get().ReplaceAllString(host, "_"), "._-")
	if host == "" {
		host = "unknown"
	}
	return "ncclrun-snapshot-" + host + "-" + now.UTC().Format("20060102-150405")
}

// ParseOutput decides the kind of an output: "" the default tarball in the
// current directory, "-" a tarball on stdout, a name ending in .tar.gz or
// .tgz a tarball, a name with another archive's suffix ErrName, any other
// name a new (or empty) directory.
func ParseOutput(v string, now time.Time) (Output, error) {
	switch {
	case v == "":
		n := defaultName(now)
		return Output{kind: "tar", Path: n + ".tar.gz", top: n}, nil
	case v == "-":
		return Output{kind: "stdout", top: defaultName(now)}, nil
	case strings.HasSuffix(v, ".tar.gz"), strings.HasSuffix(v, ".tgz"):
		top := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(v), ".tar.gz"), ".tgz")
		if top == "" || top == "." {
			top = defaultName(now)
		}
		return Output{kind: "tar", Path: v, top: top}, nil
	}
	for _, suf := range []string{".tar", ".gz", ".zip", ".tar.bz2", ".tar.xz", ".tar.zst"} {
		if strings.HasSuffix(v, suf) {
			return Output{}, ErrName
		}
	}
	return Output{kind: "dir", Path: v}, nil
}

// Open prepares the destination before anything is collected, so that a
// bad path fails at once: an error of the file system, ErrNotDir or
// ErrNotEmpty. It returns the writer of the snapshot and a cleanup that
// removes a partial output.
func (o Output) Open(stdout io.Writer) (w Writer, cleanup func(), err error) {
	switch o.kind {
	case "stdout":
		return NewTarWriter(stdout, o.top, nil), func() {}, nil
	case "tar":
		f, err := os.OpenFile(o.Path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return nil, nil, err
		}
		return NewTarWriter(f, o.top, f), func() { _ = os.Remove(o.Path) }, nil
	}
	fi, err := os.Stat(o.Path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.Mkdir(o.Path, 0o755); err != nil {
			return nil, nil, err
		}
		return &DirWriter{Root: o.Path}, func() { _ = os.RemoveAll(o.Path) }, nil
	case err != nil:
		return nil, nil, err
	case !fi.IsDir():
		return nil, nil, ErrNotDir
	}
	ents, err := os.ReadDir(o.Path)
	if err != nil {
		return nil, nil, err
	}
	if len(ents) > 0 {
		return nil, nil, ErrNotEmpty
	}
	return &DirWriter{Root: o.Path}, func() {}, nil
}

// Where names the output for a message: its path, or "stdout".
func (o Output) Where() string {
	if o.kind == "stdout" {
		return "stdout"
	}
	return o.Path
}

// Analyse is the shell command that reads the snapshot back with doctor:
// a tarball is extracted first.
func (o Output) Analyse() string {
	switch o.kind {
	case "tar":
		return "tar xzf " + shellWord(o.Path) + " && " + doctorRoot(o.top)
	case "stdout":
		return "tar xzf FILE && " + doctorRoot(o.top)
	}
	return doctorRoot(o.Path)
}

// doctorRoot is how to read a snapshot extracted at dir.
func doctorRoot(dir string) string {
	return fmt.Sprintf(`ncclrun doctor --root %s`, shellWord(dir))
}

// shellWord quotes s for a shell command line when it needs it.
func shellWord(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/+:@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
