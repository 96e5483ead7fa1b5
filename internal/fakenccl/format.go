package fakenccl

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// version is an NCCL version, major.minor.patch.
type version struct{ major, minor, patch int }

func parseVersion(s string) (version, error) {
	parts := strings.Split(strings.TrimSpace(s), ".")
	if len(parts) != 3 {
		return version{}, fmt.Errorf("%q: want MAJOR.MINOR.PATCH, e.g. 2.21.5", s)
	}
	var n [3]int
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 {
			return version{}, fmt.Errorf("%q: want MAJOR.MINOR.PATCH, e.g. 2.21.5", s)
		}
		n[i] = v
	}
	if n[0] != 2 || n[1] < 4 {
		return version{}, fmt.Errorf("%q: formats are known for NCCL 2.4 and later", s)
	}
	return version{n[0], n[1], n[2]}, nil
}

func (v version) String() string { return fmt.Sprintf("%d.%d.%d", v.major, v.minor, v.patch) }

func (v version) atLeast(major, minor, patch int) bool {
	if v.major != major {
		return v.major > major
	}
	if v.minor != minor {
		return v.minor > minor
	}
	return v.patch >= patch
}

// NCCL debug levels (src/include/nccl_common.h, ncclDebugLogLevel).
const (
	levelNone = iota
	levelVersion
	levelWarn
	levelInfo
	levelAbort
	levelTrace
)

// debugLevel reads NCCL_DEBUG as NCCL does (case-insensitive; unset or
// unknown prints nothing).
func debugLevel(s string) int {
	switch strings.ToUpper(strings.TrimSpace(s)) {
	case "VERSION":
		return levelVersion
	case "WARN":
		return levelWarn
	case "INFO":
		return levelInfo
	case "ABORT":
		return levelAbort
	case "TRACE":
		return levelTrace
	}
	return levelNone
}

// NCCL's debug subsystems (src/include/nccl_common.h, ncclDebugLogSubSys):
// every INFO line is logged with one or more of them, and
// NCCL_DEBUG_SUBSYS picks those printed.
const (
	subInit      uint64 = 0x1
	subColl      uint64 = 0x2
	subP2P       uint64 = 0x4
	subSHM       uint64 = 0x8
	subNet       uint64 = 0x10
	subGraph     uint64 = 0x20
	subTuning    uint64 = 0x40
	subEnv       uint64 = 0x80
	subAlloc     uint64 = 0x100
	subCall      uint64 = 0x200
	subProxy     uint64 = 0x400
	subNVLS      uint64 = 0x800
	subBootstrap uint64 = 0x1000
	subReg       uint64 = 0x2000
	subProfile   uint64 = 0x4000
	subRAS       uint64 = 0x8000
	subAll       uint64 = ^uint64(0) // WARN lines, the version banner, NCCLCHECK's "file:line -> N"
)

// subsysNames are NCCL_DEBUG_SUBSYS's names and their bits.
var subsysNames = []struct {
	name string
	bit  uint64
}{
	{"INIT", subInit},
	{"COLL", subColl},
	{"P2P", subP2P},
	{"SHM", subSHM},
	{"NET", subNet},
	{"GRAPH", subGraph},
	{"TUNING", subTuning},
	{"ENV", subEnv},
	{"ALLOC", subAlloc},
	{"CALL", subCall},
	{"PROXY", subProxy},
	{"NVLS", subNVLS},
	{"BOOTSTRAP", subBootstrap},
	{"REG", subReg},
	{"PROFILE", subProfile},
	{"RAS", subRAS},
	{"ALL", subAll},
}

// subsys is the bit of a subsystem name, 0 for an unknown one.
func subsys(name string) uint64 {
	for _, n := range subsysNames {
		if n.name == name {
			return n.bit
		}
	}
	return 0
}

// debugMask reads NCCL_DEBUG_SUBSYS as NCCL's debug.cc does: unset is
// INIT,BOOTSTRAP,ENV; otherwise a comma list of names (any case), a
// leading ^ meaning every subsystem but those; an unknown name counts for
// nothing.
func debugMask(s string, set bool) uint64 {
	if !set {
		return subInit | subBootstrap | subEnv
	}
	invert := strings.HasPrefix(s, "^")
	mask := uint64(0)
	if invert {
		s, mask = s[1:], subAll
	}
	for _, name := range strings.Split(s, ",") {
		m := subsys(strings.ToUpper(name))
		if invert {
			mask &^= m
		} else {
			mask |= m
		}
	}
	return mask
}

// debugFileName expands NCCL_DEBUG_FILE as NCCL's debug.cc does: %h is the
// host name as the log prints it, %p the pid, %% a %; any other %X stays
// as it is.
func debugFileName(pattern, host string, pid int) string {
	var b strings.Builder
	for i := 0; i < len(pattern); i++ {
		c := pattern[i]
		if c != '%' || i+1 == len(pattern) {
			b.WriteByte(c)
			continue
		}
		i++
		switch pattern[i] {
		case '%':
			b.WriteByte('%')
		case 'h':
			b.WriteString(host)
		case 'p':
			b.WriteString(strconv.Itoa(pid))
		default:
			b.WriteByte('%')
			b.WriteByte(pattern[i])
		}
	}
	return b.String()
}

// logHost is gethostname() cut at the first dot with % and / replaced by -
// (debug.cc getHostNameForLog).
func logHost(h string) string {
	if i := strings.IndexByte(h, '.'); i >= 0 {
		h = h[:i]
	}
	return strings.NewReplacer("%", "-", "/", "-").Replace(h)
}

// logger prints NCCL's lines in debug.cc's format. Every line is written
// with one Write so that ranks sharing a pipe do not interleave within it,
// and a debug file gets each line as it is logged (NCCL turns its
// buffering off).
type logger struct {
	w     io.Writer
	level int
	mask  uint64 // NCCL_DEBUG_SUBSYS
	v     version
	host  string
	pid   int
	tid   int
	dev   int
	tsFmt string // strftime-like format of the WARN timestamp; "" for none
	tsAll bool   // timestamps on INFO too (NCCL_DEBUG_TIMESTAMP_LEVELS)
}

// newLogger is NCCL's log as the environment sets it up (debug.cc's
// ncclDebugInit): NCCL_DEBUG's level, NCCL_DEBUG_SUBSYS's subsystems and,
// above the VERSION level, NCCL_DEBUG_FILE's file, created or truncated as
// fopen(3)'s "w" does; where that file cannot be opened, w.
func newLogger(w io.Writer, v version, dev int) *logger {
	h, _ := os.Hostname()
	subsys, set := os.LookupEnv("NCCL_DEBUG_SUBSYS")
	l := &logger{w: w, level: debugLevel(os.Getenv("NCCL_DEBUG")), mask: debugMask(subsys, set), v: v, host: logHost(h),
		pid: os.Getpid(), tid: gettid(), dev: dev}
	if name := debugFileName(os.Getenv("NCCL_DEBUG_FILE"), l.host, l.pid); l.level > levelVersion && name != "" {
		if f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o666); err == nil {
			l.w = f // left open until the process exits, as NCCL's is
		}
	}
	if v.atLeast(2, 26, 0) {
		l.tsFmt = "[%F %T] "
		if f, ok := os.LookupEnv("NCCL_DEBUG_TIMESTAMP_FORMAT"); ok {
			l.tsFmt = f
		}
		levels := strings.ToUpper(os.Getenv("NCCL_DEBUG_TIMESTAMP_LEVELS"))
		l.tsAll = levels == "ALL" || strings.Contains(levels, "INFO")
	}
	return l
}

func (l *logger) prefix() string {
	return fmt.Sprintf("%s:%d:%d [%d] ", l.host, l.pid, l.tid, l.dev)
}

// warn prints "\n[TS] host:pid:tid [dev] file:line [(fn) ]NCCL WARN msg"
// when NCCL_DEBUG is WARN or more. The function name is printed from NCCL
// 2.30.7 on, the timestamp from 2.26 on.
func (l *logger) warn(file string, line int, fn, msg string) {
	if l.level < levelWarn || l.mask == 0 {
		return
	}
	loc := fmt.Sprintf("%s:%d ", file, line)
	if fn != "" && l.v.atLeast(2, 30, 7) {
		loc += "(" + fn + ") "
	}
	l.write("\n" + l.timestamp() + l.prefix() + loc + "NCCL WARN " + msg + "\n")
}

// info prints "host:pid:tid [dev] NCCL INFO msg" when NCCL_DEBUG is INFO or
// more and NCCL_DEBUG_SUBSYS takes one of subsys.
func (l *logger) info(subsys uint64, format string, a ...any) {
	if l.level < levelInfo || l.mask&subsys == 0 {
		return
	}
	ts := ""
	if l.tsAll {
		ts = l.timestamp()
	}
	l.write(ts + l.prefix() + "NCCL INFO " + fmt.Sprintf(format, a...) + "\n")
}

// version prints NCCL's version line as showVersion() does: bare at the
// VERSION and WARN levels, as an INFO line above.
func (l *logger) version(format string, a ...any) {
	switch {
	case l.mask == 0:
	case l.level == levelVersion || l.level == levelWarn:
		l.write(fmt.Sprintf(format, a...) + "\n")
	case l.level >= levelInfo:
		l.info(subAll, format, a...)
	}
}

func (l *logger) write(s string) { _, _ = io.WriteString(l.w, s) }

// timestamp renders tsFmt with the subset of strftime NCCL's default uses
// (%F %T %Y %m %d %H %M %S %%); underscores print as spaces as in NCCL.
func (l *logger) timestamp() string {
	if l.tsFmt == "" {
		return ""
	}
	t := now()
	var b strings.Builder
	f := l.tsFmt
	for i := 0; i < len(f); i++ {
		c := f[i]
		if c == '_' {
			b.WriteByte(' ')
			continue
		}
		if c != '%' || i+1 == len(f) {
			b.WriteByte(c)
			continue
		}
		i++
		switch f[i] {
		case 'F':
			b.WriteString(t.Format("2006-01-02"))
		case 'T':
			b.WriteString(t.Format("15:04:05"))
		case 'Y':
			b.WriteString(t.Format("2006"))
		case 'm':
			b.WriteString(t.Format("01"))
		case 'd':
			b.WriteString(t.Format("02"))
		case 'H':
			b.WriteString(t.Format("15"))
		case 'M':
			b.WriteString(t.Format("04"))
		case 'S':
			b.WriteString(t.Format("05"))
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(f[i])
		}
	}
	return b.String()
}

// location is where NCCL prints a WARN from.
type location struct {
	call string // the verbs call named in the message
	file string
	line int
	fn   string // printed from 2.30.7 on
}

// regMrLocation is the ibvwrap.cc WARN of a failed memory registration per
// NCCL version (docs/research/nccl-messages.md §3.1 line table). Since 2.12 NCCL
// registers through ibv_reg_mr_iova2 when libibverbs has IBVERBS_1.8, as
// every current rdma-core does.
func regMrLocation(v version) location {
	iova := location{call: "ibv_reg_mr_iova2", file: "misc/ibvwrap.cc", fn: "wrap_ibv_reg_mr_iova2"}
	switch {
	case !v.atLeast(2, 12, 0):
		return location{call: "ibv_reg_mr", file: "misc/ibvwrap.cc", line: 252, fn: "wrap_ibv_reg_mr"}
	case !v.atLeast(2, 13, 0):
		iova.line = 278
	case !v.atLeast(2, 14, 0):
		iova.line = 283
	case !v.atLeast(2, 18, 0):
		iova.line = 278
	case !v.atLeast(2, 19, 0):
		iova.line = 150
	case !v.atLeast(2, 24, 0):
		iova.line = 169
	case !v.atLeast(2, 27, 0):
		iova.line = 178
	case !v.atLeast(2, 27, 6):
		iova.line = 182
	case !v.atLeast(2, 28, 0):
		iova.line = 188
	case !v.atLeast(2, 28, 7):
		iova.line = 189
	case !v.atLeast(2, 29, 7):
		iova.line = 194
	case !v.atLeast(2, 30, 7):
		iova.line = 197
	default:
		iova.line = 212
	}
	return iova
}

// regMrChain is the "file:line -> 2" unwinding NCCL prints at INFO after a
// failed registration. The line numbers are illustrative: they move with
// every release and consumers must match on the shape.
func regMrChain(v version) []string {
	ib := "transport/net_ib.cc:1196"
	if v.atLeast(2, 30, 0) {
		ib = "transport/net_ib/reg.cc:121"
	}
	return []string{ib, "transport/net.cc:690", "transport.cc:165", "init.cc:1263"}
}

// shmLocation is where NCCL's shared memory WARNs come from: what is
// "create", "extend" or "segment" (docs/research/nccl-messages.md §3.4).
func shmLocation(v version, what string) location {
	if v.atLeast(2, 30, 0) {
		switch what {
		case "create":
			return location{file: "os/linux.cc", line: 780, fn: "ncclOsShmOpen"}
		case "extend":
			return location{file: "os/linux.cc", line: 795, fn: "ncclOsShmOpen"}
		default:
			return location{file: "os/linux.cc", line: 842, fn: "ncclOsShmOpen"}
		}
	}
	switch what {
	case "create":
		return location{file: "misc/shmutils.cc", line: 80}
	case "extend":
		return location{file: "misc/shmutils.cc", line: 88}
	default:
		return location{file: "misc/shmutils.cc", line: 132}
	}
}
