//go:build integration

package integration

import (
	"fmt"
	"os"
	"strings"
	"sync"
)

// The observed table: filled by the tests, written at the end of the suite
// to $NCCLRUN_INTEGRATION_TABLE (docs/containers.md is made from it).
var (
	tableMu  sync.Mutex
	rawRows  = map[string]probe{}
	ncclRows = map[string]ncclRow{}
	noStart  = map[string]string{}
)

// ncclRow is what ncclrun made of a scenario.
type ncclRow struct {
	Memlock, Caps, Via string
	ChildMlock         bool
	Diagnosis          string
}

func recordRaw(name string, p probe) {
	tableMu.Lock()
	defer tableMu.Unlock()
	rawRows[name] = p
}

var shmRow string

// recordShm notes what TestShmTooSmall saw.
func recordShm(doctorStatus string, rep runReport) {
	tableMu.Lock()
	defer tableMu.Unlock()
	d := "none"
	if len(rep.Diagnoses) > 0 {
		d = rep.Diagnoses[0].ID
	}
	shmRow = fmt.Sprintf("| shm-size-64m, fake-nccl --shm 256MiB | doctor shm: %s | run exit %d | diagnosis: %s |\n", doctorStatus, rep.ExitCode, d)
}

// recordNoStart notes a scenario whose container could not start here.
func recordNoStart(name, why string) {
	tableMu.Lock()
	defer tableMu.Unlock()
	noStart[name] = why
}

func recordNCCL(name string, r ncclRow) {
	tableMu.Lock()
	defer tableMu.Unlock()
	ncclRows[name] = r
}

func yn(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// writeTable writes the markdown table of what was observed, if asked to.
func writeTable() error {
	path := os.Getenv("NCCLRUN_INTEGRATION_TABLE")
	if path == "" {
		return nil
	}
	tableMu.Lock()
	defer tableMu.Unlock()
	var b strings.Builder
	b.WriteString("| scenario | memlock soft/hard | IPC_LOCK eff/prm/bnd/amb | NoNewPrivs | PID 1 mlock 16 MiB | doctor memlock | doctor capabilities | command.via | CMD mlock 16 MiB | diagnosis |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range scenarios {
		if why, ok := noStart[s.Name]; ok {
			fmt.Fprintf(&b, "| %s | container does not start: %s | | | | | | | | |\n", s.Name, why)
			continue
		}
		p, ok := rawRows[s.Name]
		if !ok {
			continue
		}
		n, nok := ncclRows[s.Name]
		raw := fmt.Sprintf("| %s | %s / %s | %s/%s/%s/%s | %d | %s |", s.Name, fmtLimit(p.MemlockSoft), fmtLimit(p.MemlockHard),
			yn(p.IPCLock["CapEff"]), yn(p.IPCLock["CapPrm"]), yn(p.IPCLock["CapBnd"]), yn(p.IPCLock["CapAmb"]), p.NoNewPrivs, yn(p.MlockOK))
		if !nok {
			b.WriteString(raw + " (not run) | | | | |\n")
			continue
		}
		diag := n.Diagnosis
		if diag == "" {
			diag = "none"
		}
		fmt.Fprintf(&b, "%s %s | %s | %s | %s | %s |\n", raw, n.Memlock, n.Caps, n.Via, yn(n.ChildMlock), diag)
	}
	if shmRow != "" {
		b.WriteString("\n| scenario | doctor | run | diagnosis |\n|---|---|---|---|\n" + shmRow)
	}
	if fc := fileCapTable(); fc != "" {
		b.WriteString("\n" + fc)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
