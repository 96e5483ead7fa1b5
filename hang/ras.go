package hang

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"sort"
	"strings"
	"time"
)

// NCCL RAS's client protocol, as its RAS thread serves it on NCCL_RAS_ADDR
// (NVIDIA/nccl src/ras/client_support.cc, rasClientEventLoop; the ncclras
// client is src/ras/client.cc): plain TCP, one command a line, answers a
// line each, except STATUS, whose report streams until the server closes.
//
//	CLIENT PROTOCOL 2  -> SERVER PROTOCOL 2
//	SET FORMAT json    -> OK (2.28.7+), or ERROR: Unknown command ... (older)
//	STATUS             -> the report, then close
const rasProtocol = "2"

// MaxRASStatus bounds the status report read from RAS; a longer one is cut
// there (RASStatus.Truncated). A report of a thousand nodes' communicators
// in JSON stays well below it.
const MaxRASStatus = 8 << 20

// maxRASLines bounds the text report's lines kept in RASStatus.Lines.
const maxRASLines = 64

// RASStatus is what RAS said, summarised: who is missing or dead and
// whose collective counts lag. Raw is the report as read, for the
// evidence directory. The zero value is "not asked".
type RASStatus struct {
	Addr string `json:"addr"`
	// Format is "json" where the server serves it (NCCL 2.28.7+), else "text".
	Format      string `json:"format,omitempty"`
	NCCLVersion string `json:"nccl_version,omitempty"`
	// Error says why there is no (whole) report: refused, timed out, ...
	Error string `json:"error,omitempty"`
	// Truncated: the report was cut at MaxRASStatus or by the deadline.
	Truncated     bool `json:"truncated,omitempty"`
	Communicators int  `json:"communicators,omitempty"`
	// Missing are the ranks RAS has no data from, dead ones included
	// (JSON reports).
	Missing []RASRank `json:"missing,omitempty"`
	// Behind are, per communicator and collective, the ranks that launched
	// fewer operations than the most advanced rank (JSON reports).
	Behind []RASBehind `json:"behind,omitempty"`
	// Confirmed: a second query, RASRecheck later, found each rank of
	// Behind still behind with the same count (Recheck); the ranks it
	// found moving were left out of Behind.
	Confirmed bool `json:"confirmed,omitempty"`
	// Recheck says why there was no second query, or what it said when
	// it could not confirm.
	Recheck string `json:"recheck,omitempty"`
	// Lines are the Errors and Warnings sections of a text report
	// (bounded), where NCCL itself names INCOMPLETE, DEAD and MISMATCH.
	Lines []string `json:"lines,omitempty"`
	Raw   []byte   `json:"-"`
}

// RASRank is one rank of a communicator as RAS names it: the rank within
// the communicator (not the global rank), its node's IP and process.
type RASRank struct {
	Comm  string `json:"comm"`
	Rank  int    `json:"rank"`
	Host  string `json:"host,omitempty"`
	PID   int    `json:"pid,omitempty"`
	Dead  bool   `json:"dead,omitempty"`
	Count uint64 `json:"count,omitempty"` // Behind: the operations it launched
}

// RASBehind is one collective of one communicator whose counts differ
// between ranks: Max is the most any rank launched, Ranks those below it.
// Only a difference that stays across repeated queries is evidence of a
// hang; while traffic flows, counts differ briefly.
type RASBehind struct {
	Comm  string    `json:"comm"`
	Op    string    `json:"op"`
	Max   uint64    `json:"max"`
	Ranks []RASRank `json:"ranks"`
}

// RASRecheck is how long after a report with ranks behind the status is
// asked for again: a lag that is still there, unchanged, is a rank that
// stopped launching, not one caught between two collectives.
const RASRecheck = 250 * time.Millisecond

// ConfirmBehind keeps, of first's Behind, the ranks that second (a later
// query of the same job) shows behind in the same collective with the
// same count, and says so in Confirmed; where second has no report, first
// is returned with Recheck saying why.
func ConfirmBehind(first, second RASStatus) RASStatus {
	if second.Error != "" || second.Format != "json" {
		first.Recheck = "no second report to confirm it"
		if second.Error != "" {
			first.Recheck += " (" + second.Error + ")"
		}
		return first
	}
	type key struct {
		comm, op string
		rank     int
	}
	still := map[key]uint64{}
	for _, b := range second.Behind {
		for _, r := range b.Ranks {
			still[key{b.Comm, b.Op, r.Rank}] = r.Count
		}
	}
	var kept []RASBehind
	for _, b := range first.Behind {
		var ranks []RASRank
		for _, r := range b.Ranks {
			if c, ok := still[key{b.Comm, b.Op, r.Rank}]; ok && c == r.Count {
				ranks = append(ranks, r)
			}
		}
		if len(ranks) > 0 {
			b.Ranks = ranks
			kept = append(kept, b)
		}
	}
	first.Behind, first.Confirmed = kept, len(kept) > 0
	if len(kept) == 0 {
		first.Recheck = "the ranks behind had moved on " + RASRecheck.String() + " later"
	}
	return first
}

// QueryRAS asks the RAS thread at addr (host:port) for its STATUS, in
// JSON where the server serves it, within ctx's deadline; the report is
// read up to MaxRASStatus. A failure is in RASStatus.Error: a job whose
// NCCL is older than 2.24, has RAS off, or has not initialised a
// communicator yet refuses the connection.
func QueryRAS(ctx context.Context, addr string) RASStatus {
	st := RASStatus{Addr: addr}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		st.Error = err.Error()
		return st
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	r := bufio.NewReaderSize(conn, 4096)
	line, err := rasCommand(conn, r, "CLIENT PROTOCOL "+rasProtocol)
	if err != nil {
		st.Error = err.Error()
		return st
	}
	if !strings.HasPrefix(line, "SERVER PROTOCOL ") {
		st.Error = fmt.Sprintf("not a RAS server: it answered %q to the handshake", clip(line, 80))
		return st
	}
	st.Format = "text"
	line, err = rasCommand(conn, r, "SET FORMAT json")
	if err != nil {
		st.Error = err.Error()
		return st
	}
	if line == "OK" {
		st.Format = "json"
	} // else "ERROR: Unknown command SET FORMAT json": an NCCL before 2.28.7
	if _, err := io.WriteString(conn, "STATUS\n"); err != nil {
		st.Error = fmt.Sprintf("send STATUS: %v", err)
		return st
	}
	raw, err := io.ReadAll(io.LimitReader(r, MaxRASStatus+1))
	if len(raw) > MaxRASStatus {
		raw, st.Truncated = raw[:MaxRASStatus], true
	}
	st.Raw = raw
	if err != nil {
		st.Truncated = true
		st.Error = fmt.Sprintf("read STATUS: %v", err)
	}
	if st.Format == "json" {
		if perr := summariseRASJSON(&st, raw); perr != nil && st.Error == "" {
			st.Error = perr.Error()
		}
	} else {
		summariseRASText(&st, raw)
	}
	return st
}

// rasCommand sends one command and reads its one-line answer.
func rasCommand(w io.Writer, r *bufio.Reader, cmd string) (string, error) {
	if _, err := io.WriteString(w, cmd+"\n"); err != nil {
		return "", fmt.Errorf("send %s: %w", cmd, err)
	}
	var line []byte
	for {
		chunk, isPrefix, err := r.ReadLine()
		if err != nil {
			return "", fmt.Errorf("answer to %s: %w", cmd, err)
		}
		if len(line) < 256 {
			line = append(line, chunk...)
		}
		if !isPrefix {
			break
		}
	}
	return strings.TrimSpace(string(line)), nil
}

// rasJSON is the part of RAS's JSON status read here (rasDumpCommsToJSON).
type rasJSON struct {
	NCCLVersion   string `json:"nccl_version"`
	Communicators []struct {
		Hash  string `json:"hash"`
		Ranks []struct {
			Rank   int               `json:"rank"`
			Host   string            `json:"host"`
			PID    int               `json:"pid"`
			Counts map[string]uint64 `json:"collective_counts"`
		} `json:"ranks"`
		Missing []struct {
			Rank   int    `json:"rank"`
			Host   string `json:"host"`
			PID    int    `json:"pid"`
			Status struct {
				Dead bool `json:"considered_dead"`
			} `json:"status"`
		} `json:"missing_ranks"`
	} `json:"communicators"`
}

func summariseRASJSON(st *RASStatus, raw []byte) error {
	var doc rasJSON
	if err := json.Unmarshal(raw, &doc); err != nil {
		return fmt.Errorf("RAS status is not JSON: %v", err)
	}
	st.NCCLVersion = doc.NCCLVersion
	st.Communicators = len(doc.Communicators)
	for _, c := range doc.Communicators {
		for _, m := range c.Missing {
			st.Missing = append(st.Missing, RASRank{Comm: c.Hash, Rank: m.Rank, Host: m.Host, PID: m.PID, Dead: m.Status.Dead})
		}
		ops := map[string]bool{}
		for _, r := range c.Ranks {
			for op := range r.Counts {
				ops[op] = true
			}
		}
		for _, op := range sortedKeys(ops) {
			var max uint64
			for _, r := range c.Ranks {
				max = maxU(max, r.Counts[op])
			}
			b := RASBehind{Comm: c.Hash, Op: op, Max: max}
			for _, r := range c.Ranks {
				if n := r.Counts[op]; n < max {
					b.Ranks = append(b.Ranks, RASRank{Comm: c.Hash, Rank: r.Rank, Host: r.Host, PID: r.PID, Count: n})
				}
			}
			if len(b.Ranks) > 0 {
				st.Behind = append(st.Behind, b)
			}
		}
	}
	return nil
}

// summariseRASText keeps the header's NCCL version and the Errors and
// Warnings sections of a text report (rasPrintErrors, rasPrintWarnings).
func summariseRASText(st *RASStatus, raw []byte) {
	in := false
	for _, l := range bytes.Split(raw, []byte("\n")) {
		s := strings.TrimRight(string(l), "\r")
		t := strings.TrimSpace(s)
		switch {
		case strings.HasPrefix(t, "NCCL version ") && st.NCCLVersion == "":
			if f := strings.Fields(t); len(f) >= 3 {
				st.NCCLVersion = f[2]
			}
		case t == "Errors" || t == "Warnings":
			in = true
			continue
		case t == "Job summary" || strings.HasPrefix(t, "Communicators"):
			in = false
			continue
		case strings.HasPrefix(t, "===="):
			continue
		}
		if in && t != "" && len(st.Lines) < maxRASLines {
			st.Lines = append(st.Lines, clip(s, 512))
		}
	}
}

func sortedKeys(m map[string]bool) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func maxU(a, b uint64) uint64 {
	if a > b {
		return a
	}
	return b
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
