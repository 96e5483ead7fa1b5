package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ncclrun/ncclrun/internal/environ"
	"github.com/ncclrun/ncclrun/launcher"
	"github.com/ncclrun/ncclrun/preflight"
)

// The transport probe (docs/diagnosis.md "What run can learn at
// NCCL_DEBUG=WARN"): where NCCL would run at ncclrun's WARN level on a node
// with GPUs and usable RDMA ports, run asks NCCL for its INIT and NET INFO
// lines in a private NCCL_DEBUG_FILE instead, diagnoses them (the
// transport NCCL chose, GPUDirect RDMA, NCCL's version) and writes the
// lines NCCL would have printed at WARN (its WARN lines and the version
// line) to run's stdout, at line boundaries of the relayed output. The
// child's output gains no line.

const (
	// probePoll is how often the probe reads the files while CMD runs.
	probePoll = 100 * time.Millisecond
	// maxProbeBytes bounds what the probe reads of one file.
	maxProbeBytes = 64 << 20
	// probeFilePrefix starts the name of every file NCCL writes there.
	probeFilePrefix = "nccl."
)

// probeOff says why the probe is off for this run, "" when it may run.
// userEnv is the user's environment, conf what NCCL's config files set.
func probeOff(s settings, userEnv []string, conf map[string]string, rep preflight.Report, path string, stdout io.Writer) string {
	switch {
	case s.noTransportProbe:
		return "--no-transport-probe"
	case s.noWatch:
		return "--no-watch"
	case !strings.EqualFold(s.ncclDebug, "WARN"):
		return "--nccl-debug is not WARN"
	}
	for _, name := range []string{"NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE"} {
		if _, set := environ.Lookup(userEnv, name); set {
			return name + " is set"
		}
		if _, set := conf[name]; set {
			return name + " is set in NCCL's config file"
		}
	}
	// The user's NCCL_DEBUG, even WARN, is theirs: ncclrun never overrides it.
	if _, set := environ.Lookup(userEnv, "NCCL_DEBUG"); set {
		return "NCCL_DEBUG is set"
	}
	if _, set := conf["NCCL_DEBUG"]; set {
		return "NCCL_DEBUG is set in NCCL's config file"
	}
	if (launcher.Command{Path: path}).Remote() {
		// They inherit NCCL_* but not the private directory: there NCCL's
		// fopen fails and it prints INFO to stdout after all.
		return filepath.Base(path) + " starts ranks on other hosts"
	}
	if f, ok := stdout.(*os.File); !ok || isTTY(f) {
		return "stdout is a terminal or not a file"
	}
	if g, ok := rep.Check(preflight.IDGPU); !ok || g.Status == preflight.Skip {
		return "no GPU"
	}
	if len(usablePorts(rep.Facts.RDMA)) == 0 {
		return "no usable RDMA port"
	}
	return ""
}

// isTTY reports whether f is a terminal.
func isTTY(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// transportProbe reads NCCL's private debug files while CMD runs.
type transportProbe struct {
	dir   string
	owner int // uid the files must belong to
	gate  *lineGate
	files map[string]*probeFile
	stop  chan struct{}
	done  chan struct{}
	feed  func([]byte)
}

type probeFile struct {
	off     int64
	partial []byte
	full    bool // maxProbeBytes read
}

// planProbe starts planning the probe for run's child: nil when it is off
// (probeOff) or the directory cannot be made; otherwise j.s.transportEnv
// holds its variables for composeEnv.
func planProbe(e *env, j *runJob, rep preflight.Report) *transportProbe {
	if probeOff(j.s, e.environ, rep.NCCLConf, rep, j.path, e.stdout) != "" {
		return nil
	}
	uid, gid := -1, -1
	if j.user != nil {
		uid, gid = int(j.user.UID), int(j.user.GID)
	}
	probe, vars := newTransportProbe(e.stdout, uid, gid)
	j.s.transportEnv = vars
	return probe
}

// attach makes p's child use the probe when composeEnv added all of its
// variables (else it removes the directory and returns false): run's
// stdout goes through the gate, the files are the probe's to read (not
// collect's), and the directory goes with p's cleanup.
func (probe *transportProbe) attach(p *childPlan, added []launcher.EnvVar) bool {
	n := 0
	for _, a := range added {
		for _, v := range probe.vars() {
			if a.Name == v {
				n++
			}
		}
	}
	if n != len(probe.vars()) {
		os.RemoveAll(probe.dir)
		return false
	}
	p.probe = probe
	p.debugFile = ""
	probe.gate.w = p.cfg.Stdout
	p.cfg.Stdout = probe.gate
	cleanup := p.cleanup
	p.cleanup = func() { cleanup(); os.RemoveAll(probe.dir) }
	return true
}

func (probe *transportProbe) vars() []string {
	return []string{"NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE"}
}

// newTransportProbe makes the private directory (owned by CMD's uid when
// run drops to another user) and the variables that send NCCL's INIT and
// NET INFO there. It returns nil when the directory cannot be made.
func newTransportProbe(stdout io.Writer, uid, gid int) (*transportProbe, []launcher.EnvVar) {
	dir, err := os.MkdirTemp("", "ncclrun-nccl-")
	if err != nil {
		return nil, nil
	}
	if uid >= 0 && uid != os.Geteuid() {
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, nil
		}
	} else {
		uid = os.Geteuid()
	}
	p := &transportProbe{dir: dir, owner: uid, gate: &lineGate{w: stdout}, files: map[string]*probeFile{}}
	why := "ncclrun's transport probe: NCCL's INIT/NET INFO lines go to a private file ncclrun reads, its WARN lines still reach stdout (--no-transport-probe turns it off)"
	return p, []launcher.EnvVar{
		{Name: "NCCL_DEBUG", Value: "INFO", Reason: why},
		{Name: "NCCL_DEBUG_SUBSYS", Value: "INIT,NET", Reason: why},
		{Name: "NCCL_DEBUG_FILE", Value: filepath.Join(dir, probeFilePrefix+"%h.%p"), Reason: why},
	}
}

// start follows the files, feeding every line to feed, until finish.
func (p *transportProbe) start(feed func([]byte)) {
	p.feed = feed
	p.stop, p.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(p.done)
		t := time.NewTicker(probePoll)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				p.poll(false)
			}
		}
	}()
}

// finish stops the follower, reads what is left (a last line without a
// newline included), gives back the pending WARN lines and removes the
// directory. Safe without start.
func (p *transportProbe) finish() {
	if p.stop != nil {
		close(p.stop)
		<-p.done
	}
	p.poll(true)
	p.gate.flush()
	os.RemoveAll(p.dir)
}

// poll reads the new bytes of every file; at the end (last) a partial
// line counts as a line.
func (p *transportProbe) poll(last bool) {
	des, err := os.ReadDir(p.dir)
	if err != nil {
		return
	}
	for _, de := range des {
		name := de.Name()
		if !strings.HasPrefix(name, probeFilePrefix) || !de.Type().IsRegular() {
			continue
		}
		pf := p.files[name]
		if pf == nil {
			pf = &probeFile{}
			p.files[name] = pf
		}
		p.readFile(filepath.Join(p.dir, name), pf)
		if last && len(pf.partial) > 0 {
			p.line(pf.partial)
			pf.partial = nil
		}
	}
}

// readFile reads f's new bytes: no link, a regular file of the expected
// owner, at most maxProbeBytes in all.
func (p *transportProbe) readFile(path string, pf *probeFile) {
	if pf.full {
		return
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != p.owner {
		return
	}
	buf := make([]byte, 64<<10)
	for pf.off < maxProbeBytes {
		n, err := f.ReadAt(buf[:min(int64(len(buf)), maxProbeBytes-pf.off)], pf.off)
		if n > 0 {
			pf.off += int64(n)
			data := append(pf.partial, buf[:n]...)
			for {
				i := bytes.IndexByte(data, '\n')
				if i < 0 {
					break
				}
				p.line(data[:i])
				data = data[i+1:]
			}
			pf.partial = append([]byte(nil), data...)
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				return
			}
			break
		}
	}
	if pf.off >= maxProbeBytes {
		pf.full = true
	}
}

// versionLine is NCCL's version banner as its INFO level prints it; at
// WARN (VERSION) level NCCL prints the message alone.
var versionLine = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(` NCCL INFO (NCCL version \S+.*)$`) })

// line diagnoses one line of a debug file and gives back what NCCL would
// have printed at WARN: its WARN lines as they are, the version banner.
func (p *transportProbe) line(l []byte) {
	l = bytes.TrimSuffix(l, []byte("\r"))
	if p.feed != nil {
		p.feed(l)
	}
	switch {
	case bytes.Contains(l, []byte(" NCCL WARN ")):
		p.gate.emit(l)
	default:
		if m := versionLine().FindSubmatch(l); m != nil {
			p.gate.emit(m[1])
		}
	}
}

// lineGate is run's stdout while the probe runs: the relay writes CMD's
// bytes through it unchanged, and a line the probe gives back is written
// only between lines of CMD's output (while CMD's last byte is not a
// newline it waits; finish writes what still waits).
type lineGate struct {
	mu      sync.Mutex
	w       io.Writer
	open    bool // CMD's last relayed byte was not a newline
	pending [][]byte
}

func (g *lineGate) Write(b []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	n, err := g.w.Write(b)
	if n > 0 {
		g.open = b[n-1] != '\n'
	}
	if !g.open {
		g.writePending()
	}
	return n, err
}

// emit writes line (without its newline) now or when CMD's line ends.
func (g *lineGate) emit(line []byte) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pending = append(g.pending, append(append([]byte(nil), line...), '\n'))
	if !g.open {
		g.writePending()
	}
}

func (g *lineGate) flush() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.open && len(g.pending) > 0 {
		_, _ = g.w.Write([]byte{'\n'}) // CMD ended without a newline: do not glue a line to it
		g.open = false
	}
	g.writePending()
}

func (g *lineGate) writePending() {
	for _, l := range g.pending {
		_, _ = g.w.Write(l)
	}
	g.pending = nil
}
