package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/ncclrun/ncclrun/internal/units"
	"github.com/ncclrun/ncclrun/preflight"
	"github.com/ncclrun/ncclrun/preflight/snapshot"
)

// flagOutput is snapshot's --output.
const flagOutput = "output"

var snapHostRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[^A-Za-z0-9._-]+`) })

// snapshotFlags are snapshot's flags: where it goes, and --root to copy a
// tree instead of the live system. The other global flags mean nothing here.
func snapshotFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: flagOutput, Aliases: []string{"o"}, Usage: "`FILE.tar.gz`, FILE.tgz, - (stdout) or a new or empty DIR (default ncclrun-snapshot-HOST-DATE.tar.gz here)"},
		&cli.StringFlag{Name: flagRoot, Usage: "copy the tree under `DIR` instead of the live system", EnvVars: []string{envName(flagRoot)}},
	}
}

// snapOutput is where a snapshot goes.
type snapOutput struct {
	kind string // "tar" (file), "stdout" (tar.gz on stdout) or "dir"
	path string // the file or directory; "" for stdout
	top  string // the directory name inside a tarball
}

// defaultSnapName is ncclrun-snapshot-<host>-<UTC date-time>.
func defaultSnapName(now time.Time) string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	host = strings.Trim(snapHostRe().ReplaceAllString(host, "_"), "._-")
	if host == "" {
		host = "unknown"
	}
	return "ncclrun-snapshot-" + host + "-" + now.UTC().Format("20060102-150405")
}

// parseSnapOutput decides the kind of --output: "" the default tarball in
// the current directory, "-" a tarball on stdout, a name ending in .tar.gz
// or .tgz a tarball, any other name a new (or empty) directory.
func parseSnapOutput(v string, now time.Time) (snapOutput, error) {
	switch {
	case v == "":
		n := defaultSnapName(now)
		return snapOutput{kind: "tar", path: n + ".tar.gz", top: n}, nil
	case v == "-":
		return snapOutput{kind: "stdout", top: defaultSnapName(now)}, nil
	case strings.HasSuffix(v, ".tar.gz"), strings.HasSuffix(v, ".tgz"):
		top := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(v), ".tar.gz"), ".tgz")
		if top == "" || top == "." {
			top = defaultSnapName(now)
		}
		return snapOutput{kind: "tar", path: v, top: top}, nil
	}
	for _, suf := range []string{".tar", ".gz", ".zip", ".tar.bz2", ".tar.xz", ".tar.zst"} {
		if strings.HasSuffix(v, suf) {
			return snapOutput{}, usagef("--%s %q: a snapshot is FILE.tar.gz, FILE.tgz, - (stdout) or a directory", flagOutput, v)
		}
	}
	return snapOutput{kind: "dir", path: v}, nil
}

// open prepares the destination before anything is collected, so that a
// bad path fails at once as a usage error. It returns the writer of the
// snapshot and a cleanup that removes a partial output.
func (o snapOutput) open(stdout io.Writer) (w snapshot.Writer, cleanup func(), err error) {
	switch o.kind {
	case "stdout":
		return snapshot.NewTarWriter(stdout, o.top, nil), func() {}, nil
	case "tar":
		f, err := os.OpenFile(o.path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return nil, nil, usagef("--%s: %v", flagOutput, err)
		}
		return snapshot.NewTarWriter(f, o.top, f), func() { _ = os.Remove(o.path) }, nil
	}
	fi, err := os.Stat(o.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.Mkdir(o.path, 0o755); err != nil {
			return nil, nil, usagef("--%s: %v", flagOutput, err)
		}
		return &snapshot.DirWriter{Root: o.path}, func() { _ = os.RemoveAll(o.path) }, nil
	case err != nil:
		return nil, nil, usagef("--%s: %v", flagOutput, err)
	case !fi.IsDir():
		return nil, nil, usagef("--%s %q exists and is not a directory (a tarball must end in .tar.gz or .tgz)", flagOutput, o.path)
	}
	ents, err := os.ReadDir(o.path)
	if err != nil {
		return nil, nil, usagef("--%s: %v", flagOutput, err)
	}
	if len(ents) > 0 {
		return nil, nil, usagef("--%s %q is a directory that is not empty", flagOutput, o.path)
	}
	return &snapshot.DirWriter{Root: o.path}, func() {}, nil
}

// analyseHint is how to read a snapshot extracted at dir, with the
// environment it recorded.
func analyseHint(dir string) string {
	d := shellWord(dir)
	return fmt.Sprintf(`ncclrun doctor --root %s`, d)
}

func cmdSnapshot(c *cli.Context, e *env) error {
	if c.NArg() > 0 {
		return usagef("snapshot takes no arguments (got %q); use --%s FILE.tar.gz|DIR", c.Args().First(), flagOutput)
	}
	now := time.Now()
	out, err := parseSnapOutput(c.String(flagOutput), now)
	if err != nil {
		return err
	}
	src := c.String(flagRoot)
	if liveRoot(src) {
		src = "/"
	} else if fi, err := os.Stat(src); err != nil || !fi.IsDir() {
		return usagef("--%s %q is not a directory", flagRoot, src)
	}
	w, cleanup, err := out.open(e.stdout)
	if err != nil {
		return err
	}
	s := snapshot.Take(c.Context, src, e.environ)

	where, analyse := out.path, analyseHint(out.path)
	switch out.kind {
	case "tar":
		analyse = "tar xzf " + shellWord(out.path) + " && " + analyseHint(out.top)
	case "stdout":
		where = "stdout"
		analyse = "tar xzf FILE && " + analyseHint(out.top)
	}
	m := snapshot.Manifest{
		Version: version, Commit: commit, TakenAt: now.UTC().Format(time.RFC3339), Source: src,
		Files: s.Files, Bytes: s.Bytes,
		Unreadable: append([]string{}, s.Unreadable...), OverLimit: append([]string{}, s.OverLimit...),
		EnvFile: preflight.EnvFile, Analyse: analyse,
	}
	mb, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		cleanup()
		return fmt.Errorf("encode %s: %w", snapshot.ManifestFile, err)
	}
	s.Add(snapshot.ManifestFile, append(mb, '\n'))
	if err := s.Write(w); err != nil {
		_ = w.Close()
		cleanup()
		return err
	}
	if err := w.Close(); err != nil {
		cleanup()
		return err
	}
	extra := ""
	if n := len(s.Unreadable); n > 0 {
		extra += fmt.Sprintf(", %d unreadable skipped", n)
	}
	if n := len(s.OverLimit); n > 0 {
		extra += fmt.Sprintf(", %d left out over the %s/%d-file bound", n, units.FormatSize(snapshot.MaxTotal), snapshot.MaxEntries)
	}
	fprintf(e.stderr, "ncclrun: snapshot written to %s (%d files, %s%s); analyse it with: %s\n",
		where, s.Files, units.FormatSize(s.Bytes), extra, analyse)
	return nil
}

// shellWord quotes s for a shell command line when it needs it.
func shellWord(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/+:@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
