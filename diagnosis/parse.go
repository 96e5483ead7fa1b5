package diagnosis

import (
	"bytes"
	"regexp"
	"strconv"
	"sync"
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
// The expressions are compiled on first use (sync.OnceValue), not at
// package init: every ncclrun command links this package, and only those
// that parse output should pay for compiling them (~0.3 ms at start-up).
var (
	ncclPrefixRe = lazyRe(`(?:\[(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?)\] )?([A-Za-z0-9][A-Za-z0-9_.\-]*)(?::(\d{1,10}):(\d{1,10}))? \[(\d{1,6})\] (?:(.*?) )??(?:NCCL )?(WARN|INFO|TRACE|ABORT|CALL)\b ?`)
	ncclTokenRe  = lazyRe(`\bNCCL (WARN|INFO|TRACE|ABORT|CALL)\b ?`)
	rayPidRe     = lazyRe(`\((?:[\w.\-]+ )?pid=(\d{1,10})(?:, ip=([0-9A-Fa-f.:]+))?\)`)
	collectorRe  = lazyRe(`^(?:\s+|\[\d+,\d+\]<std(?:out|err)>:|\[rank\d+\]:|\[default\d+\]:|\[pod/[^\]]*\] ?|\((?:[\w.\-]+ )?pid=\d+[^)]*\) ?|\|\s*\d{4}-\d\d-\d\dT[\d:.]+Z\s*\|\s*)`)
)

// lazyRe returns a function that compiles expr on its first call (and
// panics there if it does not compile, as MustCompile would at init; the
// tests call every one) and returns the same *regexp.Regexp after.
func lazyRe(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}

// ParseLine splits one line of output into NCCL's prefix fields and the
// message. It never fails: an unrecognised line comes back with Level ""
// and Msg the whole line (without trailing CR/LF).
func ParseLine(line []byte) Line {
	line = trimEOL(line)
	l := Line{Dev: -1, Start: -1}
	if m := ncclPrefixRe().FindSubmatchIndex(line); m != nil && plausiblePrefix(line, m) {
		l.Start = m[0]
		if m[2] >= 0 {
			l.Time = string(line[m[2]:m[3]])
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
	if m := ncclTokenRe().FindSubmatchIndex(line); m != nil {
		l.Level = string(line[m[2]:m[3]])
		l.Msg = string(line[m[1]:])
	} else {
		l.Msg = string(bytes.TrimSpace(line))
	}
	if m := rayPidRe().FindSubmatchIndex(line); m != nil {
		l.PID, _ = strconv.Atoi(string(line[m[2]:m[3]]))
		if m[4] >= 0 {
			l.Host = string(line[m[4]:m[5]])
		}
	}
	return l
}

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
		loc := collectorRe().FindIndex(b)
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
		loc := collectorRe().FindIndex(b)
		if loc == nil || loc[1] == 0 {
			break
		}
		b = b[loc[1]:]
	}
	return b
}
