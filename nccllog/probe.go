package nccllog

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ncclrun/ncclrun/internal/lazy"
	"github.com/ncclrun/ncclrun/internal/safefile"
)

const (
	// probePoll is how often the probe reads the files while CMD runs: a
	// WARN line NCCL writes reaches stdout within this period plus the
	// time to read it (docs/diagnosis.md has the figures), well inside the
	// 100 ms that no line of NCCL's may wait.
	probePoll = 25 * time.Millisecond
	// maxProbeBytes bounds what the probe reads of one file.
	maxProbeBytes = 64 << 20
	// probeFilePrefix starts the name of every file NCCL writes there.
	probeFilePrefix = "nccl."
	// probeDirPrefix starts the name of the probe's directory.
	probeDirPrefix = "ncclrun-nccl-"
)

// maxProbeFiles bounds the files the probe follows (NCCL writes one a
// process of this node), each with an open descriptor, and
// maxProbeEntries the directory entries one poll looks at: the directory
// is CMD's (its user's under --user), which may put any number of names
// there.
var maxProbeFiles, maxProbeEntries = 4096, 1 << 16

// Probe follows the files NCCL writes into a private directory while CMD
// runs (the transport probe: NCCL_DEBUG=INFO, NCCL_DEBUG_FILE=DebugFile()):
// it writes the lines NCCL would have printed at WARN (its WARN lines, the
// version banner) to CMD's stdout through Gate as soon as it reads them,
// and hands every line to its Lines. Only regular files of the directory's
// owner, reached without a link, are read, at most maxProbeBytes of each;
// each is opened once and read on as it grows.
type Probe struct {
	// Dir is the private directory (mode 0700, owned by CMD's user).
	Dir   string
	owner int // uid the files must belong to
	gate  *Gate
	files map[string]*probeFile
	buf   []byte // one read buffer for every file
	stop  chan struct{}
	done  chan struct{}
	feed  Lines
}

type probeFile struct {
	f       *os.File // nil until opened, or when it may not be read (bad)
	bad     bool     // a link, not a regular file, or another user's
	off     int64
	partial []byte
	skip    bool // dropping the rest of a line cut at MaxLine
	full    bool // maxProbeBytes read
}

// NewProbe makes the private directory, owned by uid and gid when they
// are another user's (-1: ncclrun's), and a gate over stdout.
func NewProbe(stdout io.Writer, uid, gid int) (*Probe, error) {
	dir, err := os.MkdirTemp("", probeDirPrefix)
	if err != nil {
		return nil, err
	}
	if uid >= 0 && uid != os.Geteuid() {
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	} else {
		uid = os.Geteuid()
	}
	return &Probe{Dir: dir, owner: uid, gate: &Gate{w: stdout}, files: map[string]*probeFile{}}, nil
}

// DebugFile is the NCCL_DEBUG_FILE that sends NCCL's log into the
// directory, one file per host and process.
func (p *Probe) DebugFile() string { return filepath.Join(p.Dir, probeFilePrefix+"%h.%p") }

// Gate is the writer CMD's stdout must be relayed through.
func (p *Probe) Gate() *Gate { return p.gate }

// Start follows the files, handing their lines to lines, until Finish.
func (p *Probe) Start(lines Lines) {
	p.feed = lines
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

// Finish stops the follower, reads what is left (a last line without a
// newline included) and removes the directory. Safe without Start.
func (p *Probe) Finish() {
	if p.stop != nil {
		close(p.stop)
		<-p.done
	}
	p.poll(true)
	for _, pf := range p.files {
		if pf.f != nil {
			pf.f.Close()
		}
	}
	p.Remove()
}

// Remove removes the directory and what NCCL wrote there.
func (p *Probe) Remove() { os.RemoveAll(p.Dir) }

// poll reads the new bytes of every file; at the end (last) a partial
// line counts as a line.
func (p *Probe) poll(last bool) {
	d, err := os.Open(p.Dir)
	if err != nil {
		return
	}
	defer d.Close()
	for budget := maxProbeEntries; budget > 0; {
		des, err := d.ReadDir(min(budget, 1024))
		budget -= len(des)
		for _, de := range des {
			name := de.Name()
			if !strings.HasPrefix(name, probeFilePrefix) || !de.Type().IsRegular() {
				continue
			}
			pf := p.files[name]
			if pf == nil {
				if len(p.files) >= maxProbeFiles {
					continue
				}
				pf = &probeFile{}
				p.files[name] = pf
			}
			p.readFile(filepath.Join(p.Dir, name), pf)
			if last && len(pf.partial) > 0 {
				p.lines(append(pf.partial, '\n'))
				pf.partial = nil
			}
		}
		if err != nil {
			return
		}
	}
}

// readFile reads f's new bytes: no link, a regular file of the expected
// owner (checked when it is first opened), at most maxProbeBytes in all.
func (p *Probe) readFile(path string, pf *probeFile) {
	if pf.full || pf.bad {
		return
	}
	if pf.f == nil {
		f, err := safefile.Open(path)
		if err != nil {
			pf.bad = true
			return
		}
		if !ownedBy(f, p.owner) {
			f.Close()
			pf.bad = true
			return
		}
		pf.f = f
	}
	f := pf.f
	if p.buf == nil {
		p.buf = make([]byte, 64<<10)
	}
	buf := p.buf
	for pf.off < maxProbeBytes {
		n, err := f.ReadAt(buf[:min(int64(len(buf)), maxProbeBytes-pf.off)], pf.off)
		if n > 0 {
			pf.off += int64(n)
			data := append(pf.partial, buf[:n]...)
			if pf.skip {
				// The rest of a line cut at MaxLine: dropped up to its newline.
				i := bytes.IndexByte(data, '\n')
				if i < 0 {
					pf.partial = pf.partial[:0]
					continue
				}
				data, pf.skip = data[i+1:], false
			}
			end := bytes.LastIndexByte(data, '\n') + 1
			if end > 0 {
				p.lines(CutLong(data[:end]))
			}
			rest := data[end:]
			if len(rest) >= MaxLine {
				p.lines(append(rest[:MaxLine:MaxLine], '\n'))
				rest, pf.skip = nil, true
			}
			pf.partial = append(pf.partial[:0:0], rest...)
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
		pf.f.Close()
		pf.f = nil
	}
}

// ownedBy reports whether f is owned by uid.
func ownedBy(f *os.File, uid int) bool {
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == uid
}

// versionLine is NCCL's version banner as its INFO level prints it; at
// WARN (VERSION) level NCCL prints the message alone.
var versionLine = &lazy.Regexp{Expr: ` NCCL INFO (NCCL version \S+.*)$`}

// lines gives back what NCCL would have printed at WARN of whole lines of
// a debug file (its WARN lines as they are, the version banner), then
// feeds them all to the matcher.
func (p *Probe) lines(chunk []byte) {
	defer func() {
		if p.feed != nil {
			p.feed(chunk)
		}
	}()
	for rest := chunk; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n')
		l := bytes.TrimSuffix(rest[:i], []byte("\r"))
		rest = rest[i+1:]
		switch {
		case bytes.Contains(l, []byte(" NCCL WARN ")):
			p.gate.emit(l)
		default:
			if m := versionLine.Get().FindSubmatch(l); m != nil {
				p.gate.emit(m[1])
			}
		}
	}
}

// Gate is CMD's stdout while the probe runs: CMD's bytes are written
// through it unchanged and in order, and a line the probe gives back is
// written at once, whatever CMD's output holds. When CMD's last relayed
// byte is not a newline (an unfinished line, a progress bar's \r), a
// newline goes first, so that the line starts a line of its own instead of
// being glued to CMD's; CMD's next bytes follow it.
type Gate struct {
	mu   sync.Mutex
	w    io.Writer
	open bool // CMD's last relayed byte was not a newline
}

func (g *Gate) Write(b []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	n, err := g.w.Write(b)
	if n > 0 {
		g.open = b[n-1] != '\n'
	}
	return n, err
}

// emit writes line (without its newline) now, in one write.
func (g *Gate) emit(line []byte) {
	g.mu.Lock()
	defer g.mu.Unlock()
	b := make([]byte, 0, len(line)+2)
	if g.open {
		b = append(b, '\n')
	}
	b = append(append(b, line...), '\n')
	_, _ = g.w.Write(b)
	g.open = false
}
