package diagnosis

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/ncclrun/ncclrun/internal/lazy"
	"github.com/ncclrun/ncclrun/internal/printable"
)

// Where a line came from, beyond NCCL's own prefix (parse.go): the rank
// tags launchers put in front of each line, and a timestamp near its
// start.
var (
	// rankTagRe: torchrun/PyTorch "[rank3]:", mpirun --tag-output
	// "[1,3]<stdout>:", torchrun --tee "[default3]:", srun --label "3: "
	// at the start of the line.
	rankTagRe = &lazy.Regexp{Expr: `\[rank(\d{1,7})\]:|\[\d+,(\d{1,7})\]<std(?:out|err)>:|\[default(\d{1,7})\]:|^\s*(\d{1,7}): `}
	// podTagRe: kubectl logs --prefix "[pod/NAME/CONTAINER]".
	podTagRe = &lazy.Regexp{Expr: `^\[pod/([^/\]\s]+)/[^\]\s]*\]`}
	// stampRe: a date and time near the start of a line (logging, Docker,
	// CloudWatch, GitHub Actions).
	stampRe = &lazy.Regexp{Expr: `\b(\d{4}-\d\d-\d\d[ T_]\d\d:\d\d:\d\d(?:[.,]\d+)?)`}
)

// rankHost stands for the host of a process known by its launcher's rank
// tag only (procID).
var rankHost = hashString("\x00rank")

// rankTag returns the rank of a line's launcher tag near its start.
func rankTag(line []byte) (int, bool) {
	line = bytes.TrimLeft(line, " \t\r")
	if len(line) > 96 {
		line = line[:96]
	}
	if bytes.IndexByte(line, '[') < 0 {
		return 0, false
	}
	m := rankTagRe.Get().FindSubmatch(line)
	if m == nil {
		return 0, false
	}
	for _, g := range m[1:] {
		if g != nil {
			r, err := strconv.Atoi(string(g))
			return r, err == nil
		}
	}
	return 0, false
}

// stampWindow is how far into a line a timestamp may start.
const stampWindow = 64

// placeOf is where line (parsed as pl) came from.
func placeOf(line []byte, pl Line) Place {
	var p Place
	if pl.Host != "" {
		p.Host = pl.Host
	}
	head := line
	if pl.Start > 0 {
		head = line[:pl.Start]
	} else if pl.Start == 0 {
		head = nil
	}
	if len(head) > 256 {
		head = head[:256]
	}
	if m := rankTagRe.Get().FindSubmatch(head); m != nil {
		for _, g := range m[1:] {
			if g != nil {
				if r, err := strconv.Atoi(string(g)); err == nil {
					p.Rank = &r
				}
				break
			}
		}
	}
	if p.Host == "" {
		if m := podTagRe.Get().FindSubmatch(bytes.TrimLeft(line, " \t")); m != nil {
			p.Host = printable.String(string(m[1]))
		}
	}
	if pl.Time != "" {
		p.Time = pl.Time
	} else {
		w := line
		if len(w) > stampWindow+32 {
			w = w[:stampWindow+32]
		}
		if loc := stampRe.Get().FindSubmatchIndex(w); loc != nil && loc[2] <= stampWindow {
			p.Time = string(w[loc[2]:loc[3]])
		}
	}
	if len(p.Host) > maxHostLen {
		p.Host = p.Host[:maxHostLen]
	}
	return p
}

// empty reports whether p shows nothing.
func (p Place) empty() bool { return p.Host == "" && p.Rank == nil && p.Time == "" }

// String renders p for people: "rank 3 on node-b at 2024-05-01 10:00:00",
// "" when empty.
func (p Place) String() string {
	var parts []string
	if p.Rank != nil {
		parts = append(parts, "rank "+strconv.Itoa(*p.Rank))
	}
	if p.Host != "" {
		if len(parts) > 0 {
			parts = append(parts, "on "+p.Host)
		} else {
			parts = append(parts, p.Host)
		}
	}
	if p.Time != "" {
		parts = append(parts, "at "+p.Time)
	}
	return strings.Join(parts, " ")
}

// sameHost reports whether a host as NCCL prints it (cut at the first
// '.') names host h (a full or short name), case-insensitively.
func sameHost(lineHost, h string) bool {
	return strings.EqualFold(shortHost(lineHost), shortHost(h))
}

// isLocal reports whether a line is this host's as far as it shows
// (Facts.Host): a line whose NCCL prefix names another host is not.
func (m *Matcher) isLocal(v *lineView) bool {
	if !m.facts.Known || m.facts.Host == "" {
		return true
	}
	line := v.line
	if v.prefix {
		// A raw NCCL line (most of them): compared without allocating.
		if sameHostBytes(v.host(), m.facts.Host) {
			return true
		}
		m.noteRemoteWarn(line)
		return false
	}
	pl := v.parse()
	if pl.Start >= 0 && pl.Host != "" {
		if sameHost(pl.Host, m.facts.Host) {
			return true
		}
		m.noteRemoteWarn(line)
		return false
	}
	// No host shown: a repetition of another host's WARN is that host's.
	return len(m.remoteWarn) == 0 || !bytes.Contains(line, m.remoteWarn)
}

// minRemoteWarn is the shortest WARN message a line without a host is
// compared with: shorter ones ("NET/IB : ...") could be any host's.
const minRemoteWarn = 24

// noteRemoteWarn keeps the message of another host's NCCL WARN line.
func (m *Matcher) noteRemoteWarn(line []byte) {
	const warn = "NCCL WARN "
	i := bytes.Index(line, []byte(warn))
	if i < 0 {
		return
	}
	msg := bytes.TrimSpace(line[i+len(warn):])
	if len(msg) < minRemoteWarn || len(msg) > 512 {
		return
	}
	if bytes.Equal(msg, m.remoteWarn) {
		return
	}
	m.remoteWarn = append(m.remoteWarn[:0], msg...)
	// Lines without a host that repeated it before it came (another
	// pipe's lines can arrive first) were judged as this host's: they
	// were that host's. A sighting keeps its first line as quoted
	// (printable), so msg is compared as quoted too.
	quoted := ""
	for _, st := range m.order {
		for i := range st.sights {
			s := &st.sights[i]
			if !s.local || !s.hostless {
				continue
			}
			if quoted == "" {
				quoted = printable.String(string(msg))
			}
			if strings.Contains(s.firstLine, quoted) {
				s.repeat = true
			}
		}
	}
}

// sameHostBytes is sameHost for a host NCCL printed (already short).
func sameHostBytes(lineHost []byte, h string) bool {
	if i := strings.IndexByte(h, '.'); i >= 0 {
		h = h[:i]
	}
	if i := bytes.IndexByte(lineHost, '.'); i >= 0 {
		lineHost = lineHost[:i]
	}
	return len(lineHost) == len(h) && bytes.EqualFold(lineHost, []byte(h))
}
