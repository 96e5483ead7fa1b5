package diagnosis

import (
	"bytes"
	"strconv"

	"github.com/ncclrun/ncclrun/internal/printable"
)

// torchrun's failure summary (torch/distributed/elastic/multiprocessing/
// errors/__init__.py, _FAILURE_FORMAT_TEMPLATE, the same in torch 1.13 to
// 2.x) names each failed worker and, under @record, reprints its
// traceback indented by two spaces:
//
//	[1]:
//	  time      : 2026-12-01_08:35:48
//	  host      : node-1.cluster.local
//	  rank      : 1 (local_rank: 1)
//	  exitcode  : 1 (pid: 1744)
//	  error_file: /tmp/torchelastic_.../attempt_0/1/error.json
//	  traceback : Traceback (most recent call last):
//	    File "train.py", line 9, in main
//	  RuntimeError: NCCL error in: ...
//	  ncclSystemError: System call ...
//	------------------------------------------------------------
//
// A matching line of such a traceback is the process the summary names,
// which printed the same traceback itself before (and maybe NCCL WARN
// lines with its pid): it must not count as one process more. The
// summary's own lines carry none of the catalog's literals, so the
// matcher looks for these (summaryLits) besides the catalog's.

// summaryLits are the literals of the summary lines the matcher follows,
// and of the exception lines it notes (exception.go).
var summaryLits = []string{summaryHost, summaryExit, "--------", "========", "Error: ", "Exception: "}

const (
	summaryHost = "host      : "
	summaryExit = "exitcode  : "
	// summarySpan is how many lines after its last recognised line a
	// summary entry's traceback may still go on (deep stacks).
	summarySpan = 1000
)

// summary is the failure-summary entry being read.
type summary struct {
	on       bool
	host     uint64 // hash of hostName; 0 for localhost (any host)
	hostName string // cut at the first '.', "" for localhost
	pid      int64
	last     int // line number of the entry's last recognised line
}

// see follows a line that carries one of summaryLits.
func (s *summary) see(line []byte, lineNo int) {
	b := bytes.TrimLeft(stripCollector(trimEOL(line)), " \t")
	switch {
	case bytes.HasPrefix(b, []byte(summaryHost)):
		h := bytes.TrimSpace(b[len(summaryHost):])
		if i := bytes.IndexByte(h, '.'); i >= 0 {
			h = h[:i]
		}
		if len(h) > maxHostLen {
			h = h[:maxHostLen]
		}
		*s = summary{last: lineNo}
		if string(h) != "localhost" && len(h) > 0 {
			s.hostName = printable.String(string(h))
			s.host = hashString(s.hostName)
		}
	case bytes.HasPrefix(b, []byte(summaryExit)):
		i := bytes.Index(b, []byte("(pid: "))
		if i < 0 || lineNo-s.last > 3 {
			s.on = false
			return
		}
		d := b[i+len("(pid: "):]
		j := bytes.IndexByte(d, ')')
		pid, err := strconv.ParseInt(string(d[:max(j, 0)]), 10, 64)
		if j < 0 || err != nil || pid <= 0 {
			s.on = false
			return
		}
		s.pid, s.on, s.last = pid, true, lineNo
	case len(b) >= 8 && (onlyByte(b, '-') || onlyByte(b, '=')):
		s.on = false
	}
}

func onlyByte(b []byte, c byte) bool {
	b = bytes.TrimRight(b, " \t\r")
	for _, x := range b {
		if x != c {
			return false
		}
	}
	return len(b) > 0
}

// attributes reports whether line (matching, without NCCL's prefix) is a
// line of the traceback of the summary entry being read: indented by at
// least two blanks after any collector prefix, not too far from the
// entry's last line. Any other matching line ends the entry.
func (s *summary) attributes(line []byte, lineNo int) bool {
	if !s.on || lineNo-s.last > summarySpan {
		s.on = false
		return false
	}
	b := stripCollectorWords(line)
	if !bytes.HasPrefix(b, []byte("  ")) {
		s.on = false
		return false
	}
	return true
}

func (s *summary) proc() procID { return procID{s.host, s.pid} }

// summaryText is a summary traceback line's text: without collector
// prefixes, the indent, the "traceback : " field name, and blanks.
func summaryText(line []byte) []byte {
	b := bytes.TrimSpace(stripCollector(trimEOL(line)))
	b = bytes.TrimPrefix(b, []byte("traceback : "))
	return bareText(b)
}
