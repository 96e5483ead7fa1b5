package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/ncclrun/ncclrun/internal/units"
)

// flagOutput is snapshot's --output.
const flagOutput = "output"

// Bounds of a snapshot. A sysfs or procfs attribute is read with one read
// of snapMaxAttr bytes (some drivers make read-until-EOF spin); a proc file
// read to the end is cut at snapMaxFile, as preflight cuts it; the whole
// snapshot holds at most snapMaxTotal bytes of content in snapMaxEntries
// files and directories.
const (
	snapMaxAttr    = 4096
	snapMaxFile    = 4 << 20
	snapMaxTotal   = 16 << 20
	snapMaxEntries = 4096
)

// Names of the files ncclrun adds at the top of a snapshot. Neither is read
// by preflight.
const (
	snapEnvFile      = "ncclrun-env"
	snapManifestFile = "ncclrun-snapshot.json"
)

// snapEnvNames are the variables preflight reads (besides the NCCL_ and
// NCCLRUN_ prefixes); no other variable goes into a snapshot.
var snapEnvNames = map[string]bool{
	"HOME":                    true, // where ~/.nccl.conf is looked up
	"KUBERNETES_SERVICE_HOST": true,
	"KUBERNETES_SERVICE_PORT": true,
	"KUBERNETES_PORT":         true,
	"HOSTNAME":                true, // a pod's name is a platform clue
	"container":               true,
	"SLURM_JOB_ID":            true,
	"SLURM_PROCID":            true,
	"SLURM_JOB_NUM_NODES":     true,
	"SLURM_NNODES":            true,
	"PET_NNODES":              true,
	"NNODES":                  true,
	"OMPI_MCA_orte_num_nodes": true,
	"WORLD_SIZE":              true,
	"LOCAL_WORLD_SIZE":        true,
	"MASTER_ADDR":             true,
	"GLOO_SOCKET_IFNAME":      true,
}

// snapEnvAllowed reports whether a variable goes into a snapshot's
// ncclrun-env: the names above, NCCL_*, and NCCLRUN_* but NCCLRUN_ROOT
// (which would point doctor somewhere else than the snapshot).
func snapEnvAllowed(name string) bool {
	switch {
	case snapEnvNames[name]:
		return true
	case strings.HasPrefix(name, "NCCL_"):
		return true
	case strings.HasPrefix(name, "NCCLRUN_"):
		return name != envName(flagRoot)
	}
	return false
}

var (
	snapNvidiaDevRe = regexp.MustCompile(`^nvidia`)
	snapHostRe      = regexp.MustCompile(`[^A-Za-z0-9._-]+`)
)

// snapshotFlags are snapshot's flags: where it goes, and --root to copy a
// tree instead of the live system. The other global flags mean nothing here.
func snapshotFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: flagOutput, Aliases: []string{"o"}, Usage: "`FILE.tar.gz`, FILE.tgz, - (stdout) or a new or empty DIR (default ncclrun-snapshot-HOST-DATE.tar.gz here)"},
		&cli.StringFlag{Name: flagRoot, Usage: "copy the tree under `DIR` instead of the live system", EnvVars: []string{envName(flagRoot)}},
	}
}

// snapEntry is one file or directory of a snapshot.
type snapEntry struct {
	dir  bool
	data []byte
}

// snapshot is the tree being collected from src, in memory (it is bounded).
type snapshot struct {
	src        string // "/" for the live system
	srcReal    string // src with symlinks resolved
	entries    map[string]*snapEntry
	bytes      int64
	files      int
	unreadable []string // could not be read (other than not existing)
	overLimit  []string // left out: a bound was reached
	envDropped int      // variables not recorded
}

// errSnapOutside marks a path that resolves outside the area it may come from.
var errSnapOutside = errors.New("resolves outside the snapshot's source area")

// errSnapNotRegular marks a path that is not a regular file (a FIFO, a device).
var errSnapNotRegular = errors.New("not a regular file")

// resolve returns the real path of rel under src, refusing one whose
// symlinks lead out of its area: proc/ and sys/ stay in proc and sys, the
// rest stays under src (always true for the live system).
func (s *snapshot) resolve(rel string) (string, error) {
	p := filepath.Join(s.src, filepath.FromSlash(rel))
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", err
	}
	area := s.srcReal
	if first, _, _ := strings.Cut(rel, "/"); first == "proc" || first == "sys" || first == "dev" {
		area = filepath.Join(s.srcReal, first)
	}
	if !within(area, real) {
		return "", fmt.Errorf("%s: %q: %w", rel, real, errSnapOutside)
	}
	return real, nil
}

// within reports whether p is dir or below it.
func within(dir, p string) bool {
	r, err := filepath.Rel(dir, p)
	return err == nil && r != ".." && !strings.HasPrefix(r, "../") && !filepath.IsAbs(r)
}

// failed records a path that exists but could not be read; a path that
// does not exist is simply not in the snapshot.
func (s *snapshot) failed(rel string, err error) {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return
	}
	s.unreadable = append(s.unreadable, rel)
}

// room reports whether one more entry of n bytes fits, recording rel as
// left out when it does not.
func (s *snapshot) room(rel string, n int) bool {
	if len(s.entries) >= snapMaxEntries || s.bytes+int64(n) > snapMaxTotal {
		s.overLimit = append(s.overLimit, rel)
		return false
	}
	return true
}

// mkdir records a directory (and its parents).
func (s *snapshot) mkdir(rel string) bool {
	if rel == "." || rel == "" {
		return true
	}
	if e, ok := s.entries[rel]; ok {
		return e.dir
	}
	if !s.mkdir(path.Dir(rel)) || !s.room(rel, 0) {
		return false
	}
	s.entries[rel] = &snapEntry{dir: true}
	return true
}

// put records a file with its content.
func (s *snapshot) put(rel string, data []byte) {
	if _, ok := s.entries[rel]; ok {
		return
	}
	if !s.mkdir(path.Dir(rel)) || !s.room(rel, len(data)) {
		return
	}
	s.entries[rel] = &snapEntry{data: data}
	s.bytes += int64(len(data))
	s.files++
}

// read reads rel: one bounded read for an attribute, else up to
// snapMaxFile bytes. Only regular files are opened.
func (s *snapshot) read(rel string, attr bool) ([]byte, error) {
	real, err := s.resolve(rel)
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(real)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w", rel, errSnapNotRegular)
	}
	f, err := os.OpenFile(real, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if attr {
		buf := make([]byte, snapMaxAttr)
		n, err := f.Read(buf)
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		return buf[:n], nil
	}
	return io.ReadAll(io.LimitReader(f, snapMaxFile))
}

// copyFile copies rel (read to the end) when it exists and can be read.
func (s *snapshot) copyFile(rel string) []byte {
	b, err := s.read(rel, false)
	if err != nil {
		s.failed(rel, err)
		return nil
	}
	s.put(rel, b)
	return b
}

// copyAttr copies a small sysfs/procfs attribute with one bounded read.
func (s *snapshot) copyAttr(rel string) {
	b, err := s.read(rel, true)
	if err != nil {
		s.failed(rel, err)
		return
	}
	s.put(rel, b)
}

// list returns the sorted, non-hidden names in directory rel and records
// the directory; nil when it does not exist or cannot be read.
func (s *snapshot) list(rel string) []string {
	real, err := s.resolve(rel)
	if err != nil {
		s.failed(rel, err)
		return nil
	}
	ents, err := os.ReadDir(real)
	if err != nil {
		s.failed(rel, err)
		return nil
	}
	s.mkdir(rel)
	var names []string
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), ".") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names
}

// mark records that rel exists, never opening or reading it: a directory
// as an empty directory, anything else (device nodes) as an empty regular
// file of the same name.
func (s *snapshot) mark(rel string) {
	dir, err := s.resolve(path.Dir(rel))
	if err != nil {
		s.failed(rel, err)
		return
	}
	fi, err := os.Stat(filepath.Join(dir, path.Base(rel)))
	if err != nil {
		s.failed(rel, err)
		return
	}
	if fi.IsDir() {
		s.mkdir(rel)
		return
	}
	s.put(rel, []byte{})
}

// copyConf copies an NCCL configuration file keeping only its NCCL_* lines:
// they are all preflight uses, and a NCCL_CONF_FILE pointing at a file that
// is not NCCL's can then leak nothing.
func (s *snapshot) copyConf(rel string) {
	b, err := s.read(rel, false)
	if err != nil {
		s.failed(rel, err)
		return
	}
	var out bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		k, _, ok := strings.Cut(sc.Text(), "=")
		if ok && strings.HasPrefix(k, "NCCL_") {
			out.WriteString(sc.Text())
			out.WriteByte('\n')
		}
	}
	s.put(rel, out.Bytes())
}

// collectSnapshot copies from src ("/" is the live system) every file
// preflight reads under --root, and records environ's variables that
// preflight uses. It never fails: what cannot be read is counted.
func collectSnapshot(src string, environ []string) *snapshot {
	s := &snapshot{src: src, srcReal: src, entries: map[string]*snapEntry{}}
	if r, err := filepath.EvalSymlinks(src); err == nil {
		s.srcReal = r
	}
	// ncclrun's own credentials and limits: this process, as found
	// (snapshot raises nothing; doctor --root simulates run's raise).
	for _, f := range []string{
		"proc/self/status", "proc/self/limits", "proc/self/uid_map",
		"proc/self/cgroup", "proc/1/cgroup", "proc/meminfo",
		"proc/net/if_inet6", "proc/net/route", "proc/net/fib_trie",
		"etc/passwd", "etc/group",
	} {
		s.copyFile(f)
	}
	// /dev/shm's size is the size= option of its mount line; dev/shm
	// itself is not recorded (doctor --root would statfs the analyst's disk).
	for _, f := range []string{"proc/self/mountinfo", "proc/mounts"} {
		s.copyFile(f)
	}
	for _, a := range []string{
		"proc/sys/kernel/osrelease", "proc/driver/nvidia/version",
		"sys/module/nvidia_peermem/version",
		"sys/kernel/mm/memory_peers/nv_mem/version", "sys/kernel/mm/memory_peers/nv_mem_nc/version",
	} {
		s.copyAttr(a)
	}
	s.mark("sys/module/nvidia_peermem")
	for _, g := range s.list("proc/driver/nvidia/gpus") {
		s.mkdir("proc/driver/nvidia/gpus/" + g)
		s.copyFile("proc/driver/nvidia/gpus/" + g + "/information")
	}
	for _, n := range s.list("sys/class/net") {
		base := "sys/class/net/" + n
		s.mkdir(base)
		s.copyAttr(base + "/flags")
		s.copyAttr(base + "/operstate")
	}
	for _, d := range s.list("sys/class/infiniband") {
		base := "sys/class/infiniband/" + d
		s.mkdir(base)
		for _, a := range []string{"fw_ver", "hca_type", "board_id", "node_type"} {
			s.copyAttr(base + "/" + a)
		}
		for _, v := range s.list(base + "/device/infiniband_verbs") {
			s.mkdir(base + "/device/infiniband_verbs/" + v)
		}
		for _, p := range s.list(base + "/ports") {
			pb := base + "/ports/" + p
			s.mkdir(pb)
			for _, a := range []string{"state", "phys_state", "link_layer", "rate"} {
				s.copyAttr(pb + "/" + a)
			}
		}
	}
	for _, v := range s.list("sys/class/infiniband_verbs") {
		s.mkdir("sys/class/infiniband_verbs/" + v)
		s.copyAttr("sys/class/infiniband_verbs/" + v + "/ibdev")
	}
	// Device nodes: their names only.
	for _, n := range s.list("dev") {
		if snapNvidiaDevRe.MatchString(n) {
			s.mark("dev/" + n)
		}
	}
	for _, n := range s.list("dev/infiniband") {
		s.mark("dev/infiniband/" + n)
	}
	// Platform clues: existence only, never the service account token.
	s.mark(".dockerenv")
	s.mark("var/run/secrets/kubernetes.io/serviceaccount")
	// NCCL's configuration files, looked up as preflight.NCCLConfig does.
	env := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			env[k] = v
		}
	}
	var confs []string
	if f := env["NCCL_CONF_FILE"]; f != "" {
		confs = append(confs, f)
	} else if h := env["HOME"]; h != "" {
		confs = append(confs, path.Join(h, ".nccl.conf"))
	}
	confs = append(confs, "/etc/nccl.conf")
	for _, c := range confs {
		s.copyConf(strings.TrimPrefix(path.Clean("/"+c), "/"))
	}
	// The environment: the listed variables only, one KEY=VALUE a line.
	var lines []string
	for k, v := range env {
		if !snapEnvAllowed(k) || strings.ContainsAny(v, "\n\x00") {
			s.envDropped++
			continue
		}
		lines = append(lines, k+"="+v)
	}
	sort.Strings(lines)
	envText := strings.Join(lines, "\n")
	if envText != "" {
		envText += "\n"
	}
	s.entries[snapEnvFile] = &snapEntry{data: []byte(envText)}
	return s
}

// snapManifest is ncclrun-snapshot.json: what was taken, and what not.
type snapManifest struct {
	Version    string   `json:"ncclrun_version"`
	Commit     string   `json:"ncclrun_commit"`
	TakenAt    string   `json:"taken_at"`
	Source     string   `json:"source"`
	Files      int      `json:"files"`
	Bytes      int64    `json:"bytes"`
	Unreadable []string `json:"unreadable"`
	OverLimit  []string `json:"over_limit"`
	EnvFile    string   `json:"env_file"`
	Analyse    string   `json:"analyse"`
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
	host = strings.Trim(snapHostRe.ReplaceAllString(host, "_"), "._-")
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
func (o snapOutput) open(stdout io.Writer) (w snapWriter, cleanup func(), err error) {
	switch o.kind {
	case "stdout":
		return newTarWriter(stdout, o.top, nil), func() {}, nil
	case "tar":
		f, err := os.OpenFile(o.path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return nil, nil, usagef("--%s: %v", flagOutput, err)
		}
		return newTarWriter(f, o.top, f), func() { _ = os.Remove(o.path) }, nil
	}
	fi, err := os.Stat(o.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.Mkdir(o.path, 0o755); err != nil {
			return nil, nil, usagef("--%s: %v", flagOutput, err)
		}
		return &dirWriter{root: o.path}, func() { _ = os.RemoveAll(o.path) }, nil
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
	return &dirWriter{root: o.path}, func() {}, nil
}

// snapWriter writes a snapshot's entries, parents before children.
type snapWriter interface {
	dir(rel string) error
	file(rel string, data []byte) error
	close() error
}

// dirWriter writes a snapshot as a directory tree.
type dirWriter struct{ root string }

func (d *dirWriter) dir(rel string) error {
	p := filepath.Join(d.root, filepath.FromSlash(rel))
	if err := os.Mkdir(p, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("write snapshot: %w", err)
	}
	return nil
}

func (d *dirWriter) file(rel string, data []byte) error {
	p := filepath.Join(d.root, filepath.FromSlash(rel))
	if err := os.WriteFile(p, data, 0o644); err != nil {
		return fmt.Errorf("write snapshot: %w", err)
	}
	return nil
}

func (d *dirWriter) close() error { return nil }

// tarWriter writes a snapshot as a gzip-compressed tar under one top
// directory.
type tarWriter struct {
	top    string
	tw     *tar.Writer
	gz     *gzip.Writer
	closer io.Closer
	now    time.Time
}

func newTarWriter(w io.Writer, top string, c io.Closer) *tarWriter {
	gz := gzip.NewWriter(w)
	return &tarWriter{top: top, tw: tar.NewWriter(gz), gz: gz, closer: c, now: time.Now()}
}

func (t *tarWriter) header(rel string, dir bool, size int) error {
	name := t.top + "/" + rel
	if rel == "." {
		name = t.top
	}
	h := &tar.Header{Name: name, Mode: 0o644, Size: int64(size), ModTime: t.now, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
	if dir {
		h.Name += "/"
		h.Mode, h.Size, h.Typeflag = 0o755, 0, tar.TypeDir
	}
	if err := t.tw.WriteHeader(h); err != nil {
		return fmt.Errorf("write snapshot: %w", err)
	}
	return nil
}

func (t *tarWriter) dir(rel string) error { return t.header(rel, true, 0) }

func (t *tarWriter) file(rel string, data []byte) error {
	if err := t.header(rel, false, len(data)); err != nil {
		return err
	}
	if _, err := t.tw.Write(data); err != nil {
		return fmt.Errorf("write snapshot: %w", err)
	}
	return nil
}

func (t *tarWriter) close() error {
	var errs []error
	errs = append(errs, t.tw.Close(), t.gz.Close())
	if t.closer != nil {
		errs = append(errs, t.closer.Close())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("write snapshot: %w", err)
	}
	return nil
}

// write writes every entry, sorted so that parents come first.
func (s *snapshot) write(w snapWriter) error {
	rels := make([]string, 0, len(s.entries))
	for r := range s.entries {
		rels = append(rels, r)
	}
	sort.Strings(rels)
	if err := w.dir("."); err != nil {
		return err
	}
	for _, r := range rels {
		e := s.entries[r]
		var err error
		if e.dir {
			err = w.dir(r)
		} else {
			err = w.file(r, e.data)
		}
		if err != nil {
			return err
		}
	}
	return nil
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
	s := collectSnapshot(src, e.environ)

	where, analyse := out.path, analyseHint(out.path)
	switch out.kind {
	case "tar":
		analyse = "tar xzf " + shellWord(out.path) + " && " + analyseHint(out.top)
	case "stdout":
		where = "stdout"
		analyse = "tar xzf FILE && " + analyseHint(out.top)
	}
	m := snapManifest{
		Version: version, Commit: commit, TakenAt: now.UTC().Format(time.RFC3339), Source: src,
		Files: s.files, Bytes: s.bytes,
		Unreadable: append([]string{}, s.unreadable...), OverLimit: append([]string{}, s.overLimit...),
		EnvFile: snapEnvFile, Analyse: analyse,
	}
	mb, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		cleanup()
		return fmt.Errorf("encode %s: %w", snapManifestFile, err)
	}
	s.entries[snapManifestFile] = &snapEntry{data: append(mb, '\n')}
	if err := s.write(w); err != nil {
		_ = w.close()
		cleanup()
		return err
	}
	if err := w.close(); err != nil {
		cleanup()
		return err
	}
	extra := ""
	if n := len(s.unreadable); n > 0 {
		extra += fmt.Sprintf(", %d unreadable skipped", n)
	}
	if n := len(s.overLimit); n > 0 {
		extra += fmt.Sprintf(", %d left out over the %s/%d-file bound", n, units.FormatSize(snapMaxTotal), snapMaxEntries)
	}
	fprintf(e.stderr, "ncclrun: snapshot written to %s (%d files, %s%s); analyse it with: %s\n",
		where, s.files, units.FormatSize(s.bytes), extra, analyse)
	return nil
}

// shellWord quotes s for a shell command line when it needs it.
func shellWord(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/+:@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
