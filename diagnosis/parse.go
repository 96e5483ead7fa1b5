package diagnosis

import (
	"bytes"
	"strconv"

	"github.com/ncclrun/ncclrun/internal/lazy"
)

// Line is what ParseLine found in one line of output. The zero value
// (Dev -1 aside) means nothing was recognised.
type Line struct {
	// Host and PID come from NCCL's "host:pid:tid [dev]" prefix (the host
	// as NCCL prints it: cut at the first '.'), or from a Ray/vLLM
	// "(Name pid=N, ip=A)" prefix (Host is then the IP). Empty/0 when absent.
	Host string
	PID  int
	TID  int
	// Dev is the CUDA device in "[dev]", -1 when absent.
	Dev int
	// Time is the "[YYYY-MM-DD HH:MM:SS]" timestamp NCCL >= 2.26 puts
	// before WARN lines, without brackets.
	Time string
	// Loc is "file:line" or "file:line (func)" (plugins: a function name,
	// possibly with spaces, "::" and parentheses), empty for INFO.
	Loc string
	// Level is WARN, INFO, TRACE, ABORT or CALL; empty when the line has
	// no NCCL level token (a bare message, e.g. after PyTorch's "Last error:").
	Level string
	// Msg is the text after the level token, or the whole line when there
	// is none.
	Msg string
	// Start is the byte offset where NCCL's prefix (timestamp or host)
	// begins, -1 when there is no prefix.
	Start int
}

// NCCL's line format (docs/research/nccl-messages.md §1): an optional
// "[%F %T] " timestamp (WARN, 2.26+), "host:pid:tid [dev] ", for WARN
// "file:line " or "file:line (func) ", then "NCCL LEVEL msg". Before 2.3
// there was no "NCCL " token and sometimes no ":pid:tid". The location is
// matched lazily so that plugin function names with spaces survive; the
// prefix is searched, not anchored, because launchers and collectors put
// their own prefixes (and tqdm its \r padding) in front of it.
//
// The expressions are compiled on first use (internal/lazy), not at
// package init: every ncclrun command links this package, and only those
// that parse output should pay for compiling them (~0.3 ms at start-up).
var (
	ncclPrefixRe = &lazy.Regexp{Expr: `(?:\[(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?)\] )?([A-Za-z0-9][A-Za-z0-9_.\-]*)(?::(\d{1,10}):(\d{1,10}))? \[(\d{1,6})\] (?:(.*?) )??(?:NCCL )?(WARN|INFO|TRACE|ABORT|CALL)\b ?`}
	ncclTokenRe  = &lazy.Regexp{Expr: `\bNCCL (WARN|INFO|TRACE|ABORT|CALL)\b ?`}
	rayPidRe     = &lazy.Regexp{Expr: `\((?:[\w.\-]+ )?pid=(\d{1,10})(?:, ip=([0-9A-Fa-f.:]+))?\)`}
	collectorRe  = &lazy.Regexp{Expr: `^(?:\s+|\[\d+,\d+\]<std(?:out|err)>:|\[rank\d+\]:|\[default\d+\]:|\[pod/[^\]]*\] ?|\((?:[\w.\-]+ )?pid=\d+[^)]*\) ?|\|\s*\d{4}-\d\d-\d\dT[\d:.]+Z\s*\|\s*)`}
)

// ParseLine splits one line of output into NCCL's prefix fields and the
// message. It never fails: an unrecognised line comes back with Level ""
// and Msg the whole line (without trailing CR/LF).
func ParseLine(line []byte) Line {
	line = trimEOL(line)
	if l, ok := parsePrefixAt0(line); ok {
		return l
	}
	return parseLineRe(line)
}

// parseLineRe is ParseLine by the regular expressions alone (the tests
// check parsePrefixAt0 against it).
func parseLineRe(line []byte) Line {
	l := Line{Dev: -1, Start: -1}
	if m := ncclPrefixRe.Get().FindSubmatchIndex(line); m != nil && plausiblePrefix(line, m) {
		l.Start = m[0]
		if m[2] >= 0 {
			l.Time = string(line[m[2]:m[3]])
		}
		if m[2] < 0 {
			// No timestamp: the host starts the prefix, and may be glued
			// to a progress bar.
			if n := barTotal(line, m[4], m[5]); n > 0 {
				l.Start, m[4] = m[4]+n, m[4]+n
			}
		}
		l.Host = string(line[m[4]:m[5]])
		if m[6] >= 0 {
			l.PID, _ = strconv.Atoi(string(line[m[6]:m[7]]))
			l.TID, _ = strconv.Atoi(string(line[m[8]:m[9]]))
		}
		l.Dev, _ = strconv.Atoi(string(line[m[10]:m[11]]))
		if m[12] >= 0 {
			l.Loc = string(line[m[12]:m[13]])
		}
		l.Level = string(line[m[14]:m[15]])
		l.Msg = string(line[m[1]:])
		return l
	}
	if m := ncclTokenRe.Get().FindSubmatchIndex(line); m != nil {
		l.Level = string(line[m[2]:m[3]])
		l.Msg = string(line[m[1]:])
	} else {
		l.Msg = string(bytes.TrimSpace(line))
	}
	if m := rayPidRe.Get().FindSubmatchIndex(line); m != nil {
		l.PID, _ = strconv.Atoi(string(line[m[2]:m[3]]))
		if m[4] >= 0 {
			l.Host = string(line[m[4]:m[5]])
		}
	}
	return l
}

// barTotal is how many bytes at the start of the host line[h:e] are the
// total of a progress bar's "n/total" that NCCL's line was written right
// after: tqdm redraws its bar with '\r' and no newline, so
// "\r 10%|##  | 2600/5000node-a:1234:1300 [0] ..." is host node-a (a
// '\r' before the host, digits after "n/", then a letter: a host that
// starts with digits keeps them elsewhere).
func barTotal(line []byte, h, e int) int {
	if h < 2 || line[h-1] != '/' || !isDigit(line[h-2]) {
		return 0
	}
	k := h
	for k < e && isDigit(line[k]) {
		k++
	}
	if k == h || k == e || !isLetter(line[k]) || bytes.IndexByte(line[:h], '\r') < 0 {
		return 0
	}
	return k - h
}

func isDigit(c byte) bool  { return '0' <= c && c <= '9' }
func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// plausiblePrefix rejects a pre-2.3 style match ("word [n] ... WARN")
// without pid whose level is not preceded by "NCCL " and has no file:line
// location: that is prose, not NCCL.
func plausiblePrefix(line []byte, m []int) bool {
	if m[6] >= 0 {
		return true
	}
	if bytes.HasSuffix(bytes.TrimRight(line[m[0]:m[14]], " "), []byte("NCCL")) {
		return true
	}
	return m[12] >= 0 && bytes.IndexByte(line[m[12]:m[13]], ':') > 0
}

func trimEOL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

// stripCollector removes launcher and collector prefixes (mpirun
// --tag-output, torchrun/PyTorch rank tags, kubectl --prefix, Ray/vLLM,
// CloudWatch) and leading blanks from a line without an NCCL prefix.
func stripCollector(b []byte) []byte {
	for i := 0; i < 8; i++ {
		loc := collectorRe.Get().FindIndex(b)
		if loc == nil || loc[1] == 0 {
			break
		}
		b = b[loc[1]:]
	}
	return b
}

// stripCollectorWords is stripCollector that keeps leading blanks: what
// follows the collector prefixes, indentation included.
func stripCollectorWords(b []byte) []byte {
	for i := 0; i < 8 && len(b) > 0 && b[0] != ' ' && b[0] != '\t'; i++ {
		loc := collectorRe.Get().FindIndex(b)
		if loc == nil || loc[1] == 0 {
			break
		}
		b = b[loc[1]:]
	}
	return b
}

// prefixAt0 is where parsePrefixAt0 found the fields, as offsets into the
// line (no allocation: the matcher counts with these).
type prefixAt0 struct {
	timeEnd            int // end of the timestamp inside its brackets, 0 when none
	hostStart, hostEnd int
	pid, tid, dev      int
	tidEnd             int // after the tid: " [dev] ..." starts here
	restStart          int // after "] "
	locEnd             int // -1: no location
	level              string
	msgStart           int
}

// parsePrefixAt0 parses NCCL's prefix when the line starts with it and has
// a pid (the common case: a raw NCCL line), by hand and as ncclPrefixRe
// would: the optional timestamp, the host, ":pid:tid", " [dev] ", then the
// shortest location before "NCCL LEVEL" or "LEVEL" at a word end. ok is
// false for anything else, which parseLineRe then reads.
func parsePrefixAt0(b []byte) (Line, bool) {
	f, ok := scanPrefixAt0(b)
	if !ok {
		return Line{}, false
	}
	l := Line{Start: 0, Host: string(b[f.hostStart:f.hostEnd]), PID: f.pid, TID: f.tid, Dev: f.dev, Level: f.level, Msg: string(b[f.msgStart:])}
	if f.timeEnd > 0 {
		l.Time = string(b[1:f.timeEnd])
	}
	if f.locEnd >= 0 {
		l.Loc = string(b[f.restStart:f.locEnd])
	}
	return l, true
}

func scanPrefixAt0(b []byte) (prefixAt0, bool) {
	f, ok := scanWho(b)
	if !ok {
		return f, false
	}
	t, ok := scanWhat(b[f.tidEnd:])
	return f.with(t), ok
}

// scanWho reads the part of NCCL's prefix that says who printed the line:
// the optional timestamp, "host:pid:tid", up to the " [" that follows
// (tidEnd). ok is false when the line does not start so.
func scanWho(b []byte) (prefixAt0, bool) {
	var f prefixAt0
	i := 0
	if len(b) > 0 && b[0] == '[' {
		j := bytes.IndexByte(b, ']')
		if j < 0 || !isNCCLTime(b[1:j]) || j+1 >= len(b) || b[j+1] != ' ' {
			return f, false
		}
		f.timeEnd = j
		i = j + 2
	}
	h := i
	for i < len(b) && (isWordByte(b[i]) && b[i] != '_' || i > h && (b[i] == '_' || b[i] == '.' || b[i] == '-')) {
		i++
	}
	if i == h || i >= len(b) || b[i] != ':' {
		return f, false
	}
	f.hostStart, f.hostEnd = h, i
	var ok bool
	if f.pid, i, ok = digits(b, i+1, 10); !ok || i >= len(b) || b[i] != ':' {
		return f, false
	}
	if f.tid, i, ok = digits(b, i+1, 10); !ok || !bytes.HasPrefix(b[i:], []byte(" [")) {
		return f, false
	}
	f.tidEnd = i
	return f, true
}

// with is f (scanWho's) completed by t, scanWhat's fields of the text
// from f.tidEnd on.
func (f prefixAt0) with(t prefixAt0) prefixAt0 {
	f.dev, f.level = t.dev, t.level
	f.restStart, f.msgStart = f.tidEnd+t.restStart, f.tidEnd+t.msgStart
	f.locEnd = -1
	if t.locEnd >= 0 {
		f.locEnd = f.tidEnd + t.locEnd
	}
	return f
}

// scanWhat reads the rest of NCCL's prefix in the text that follows
// host:pid:tid (" [dev] location NCCL LEVEL message"): dev, restStart,
// locEnd, level and msgStart, as offsets into b. It is a function of
// that text alone: the matcher remembers it with the text (memo.go).
func scanWhat(b []byte) (prefixAt0, bool) {
	var f prefixAt0
	var i int
	var ok bool
	if f.dev, i, ok = digits(b, 2, 6); !ok || !bytes.HasPrefix(b[i:], []byte("] ")) {
		return f, false
	}
	f.restStart = i + 2
	rest := b[f.restStart:]
	for k := 0; k <= len(rest); k++ {
		if k > 0 && rest[k-1] == '\n' {
			return f, false // '.' does not cross a newline
		}
		if k > 0 && rest[k-1] != ' ' {
			continue
		}
		end, lvl := levelAt(rest, k)
		if end < 0 {
			continue
		}
		f.locEnd = -1
		if k > 0 {
			f.locEnd = f.restStart + k - 1
		}
		f.level = lvl
		if end < len(rest) && rest[end] == ' ' {
			end++
		}
		f.msgStart = f.restStart + end
		return f, true
	}
	return f, false
}

var ncclLevels = []string{"WARN", "INFO", "TRACE", "ABORT", "CALL"}

// levelAt matches `(?:NCCL )?(WARN|INFO|TRACE|ABORT|CALL)\b` at b[k:],
// "NCCL " taken when it can be: the end of the match and the level, or -1.
func levelAt(b []byte, k int) (int, string) {
	for _, skip := range []int{5, 0} {
		s := b[k:]
		if skip == 5 {
			if !bytes.HasPrefix(s, []byte("NCCL ")) {
				continue
			}
			s = s[5:]
		}
		for _, lv := range ncclLevels {
			if bytes.HasPrefix(s, []byte(lv)) && (len(s) == len(lv) || !isWordByte(s[len(lv)])) {
				return k + skip + len(lv), lv
			}
		}
	}
	return -1, ""
}

// digits reads 1 to max decimal digits at b[i:].
func digits(b []byte, i, max int) (v, end int, ok bool) {
	j := i
	for j < len(b) && j-i < max && b[j] >= '0' && b[j] <= '9' {
		v = v*10 + int(b[j]-'0')
		j++
	}
	if j == i || (j < len(b) && b[j] >= '0' && b[j] <= '9') {
		return 0, 0, false
	}
	return v, j, true
}

// isNCCLTime reports whether t is `\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?`.
func isNCCLTime(t []byte) bool {
	const shape = "dddd-dd-dd?dd:dd:dd"
	if len(t) < len(shape) {
		return false
	}
	for i := 0; i < len(shape); i++ {
		c := t[i]
		switch shape[i] {
		case 'd':
			if c < '0' || c > '9' {
				return false
			}
		case '?':
			if c != ' ' && c != 'T' {
				return false
			}
		default:
			if c != shape[i] {
				return false
			}
		}
	}
	r := t[len(shape):]
	if len(r) == 0 {
		return true
	}
	if (r[0] != '.' && r[0] != ',') || len(r) == 1 {
		return false
	}
	for _, c := range r[1:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
