//go:build integration

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	b.WriteString(dockerTableLocked())
	if shmRow != "" {
		b.WriteString("\n| scenario | doctor | run | diagnosis |\n|---|---|---|---|\n" + shmRow)
	}
	if ct := criTableLocked(); ct != "" {
		b.WriteString("\n" + ct)
	}
	if ct := criTermTableLocked(); ct != "" {
		b.WriteString("\n" + ct)
	}
	if fc := fileCapTable(); fc != "" {
		b.WriteString("\n" + fc)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// dockerTableLocked renders the Docker scenarios' rows (TestRuntimeFacts
// and TestNcclrunScenarios) under tableMu.
func dockerTableLocked() string {
	var b strings.Builder
	b.WriteString(tableHeader)
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
	return b.String()
}

// checkDocDockerRows compares docs/containers.md's Docker rows with this
// run's, where the host is the one the page shows: dockerd's containerd at
// 8 MiB and an engine without CAP_SYS_RESOURCE. Rows not fully run are not compared.
func checkDocDockerRows(t *testing.T) {
	t.Helper()
	if soft, hard, ok := daemonMemlock(); !ok || soft != 8<<20 || hard != 8<<20 || engineCanRaiseLimits() {
		t.Logf("this engine is not docs/containers.md's (containerd memlock 8 MiB, no CAP_SYS_RESOURCE): Docker rows not compared")
		return
	}
	tableMu.Lock()
	tbl := dockerTableLocked()
	complete := map[string]bool{}
	for _, s := range scenarios {
		_, ran := ncclRows[s.Name]
		complete[s.Name] = ran || noStart[s.Name] != ""
	}
	tableMu.Unlock()
	rows := docRows(t)
	for _, l := range strings.Split(tbl, "\n") {
		if !strings.HasPrefix(l, "| ") || strings.HasPrefix(l, "| scenario") {
			continue
		}
		name := strings.TrimSpace(strings.Split(l, "|")[1])
		if !complete[name] {
			continue
		}
		assert.Equal(t, l, rows[name], "docs/containers.md's row for %s is not what the Docker suite saw: update it from this run", name)
	}
}

// The CRI suite's rows (cri_test.go), kept apart from Docker's.
var (
	criRawRows  = map[string]probe{}
	criEngine   = map[string]string{}
	criNcclRows = map[string]ncclRow{}
	criNoStart  = map[string]string{}
)

func recordCRIRaw(name, memlock string, p probe) {
	tableMu.Lock()
	defer tableMu.Unlock()
	criRawRows[name], criEngine[name] = p, memlock
}

func recordCRINCCL(name string, r ncclRow) {
	tableMu.Lock()
	defer tableMu.Unlock()
	criNcclRows[name] = r
}

func recordCRINoStart(name, why string) {
	tableMu.Lock()
	defer tableMu.Unlock()
	criNoStart[name] = why
}

const tableHeader = "| scenario | memlock soft/hard | IPC_LOCK eff/prm/bnd/amb | NoNewPrivs | PID 1 mlock 16 MiB | doctor memlock | doctor capabilities | command.via | CMD mlock 16 MiB | diagnosis |\n" +
	"|---|---|---|---|---|---|---|---|---|---|\n"

// criTable renders what TestCRIScenarios saw, in criScenarios order; ""
// when it did not run.
func criTable() string {
	tableMu.Lock()
	defer tableMu.Unlock()
	return criTableLocked()
}

// criTableLocked is criTable for a caller holding tableMu.
func criTableLocked() string {
	if len(criRawRows) == 0 && len(criNoStart) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(tableHeader)
	for _, s := range criScenarios {
		if why, ok := criNoStart[s.Name]; ok {
			fmt.Fprintf(&b, "| %s | container does not start: %s | | | | | | | | |\n", s.Name, why)
			continue
		}
		p, ok := criRawRows[s.Name]
		if !ok {
			continue
		}
		raw := fmt.Sprintf("| %s | %s / %s | %s/%s/%s/%s | %d | %s |", s.Name, fmtLimit(p.MemlockSoft), fmtLimit(p.MemlockHard),
			yn(p.IPCLock["CapEff"]), yn(p.IPCLock["CapPrm"]), yn(p.IPCLock["CapBnd"]), yn(p.IPCLock["CapAmb"]), p.NoNewPrivs, yn(p.MlockOK))
		n, nok := criNcclRows[s.Name]
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
	return b.String()
}

// docRows returns the rows of docs/containers.md's scenario tables (those
// under the suite's tableHeader: Docker's and the CRI's), by scenario
// (first cell).
func docRows(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "docs", "containers.md"))
	require.NoError(t, err)
	header, _, _ := strings.Cut(tableHeader, "\n")
	rows := map[string]string{}
	in, tables := false, 0
	for _, l := range strings.Split(string(b), "\n") {
		switch {
		case l == header:
			in = true
			tables++
		case !strings.HasPrefix(l, "|"):
			in = false
		case in && !strings.HasPrefix(l, "|---"):
			name := strings.TrimSpace(strings.Split(l, "|")[1])
			rows[name] = l
		}
	}
	require.Equal(t, 2, tables, "docs/containers.md has the Docker and the CRI scenario tables")
	return rows
}

// TestDocContainerRowsHaveTests: every row of docs/containers.md's
// scenario tables is a scenario this suite runs (Docker's scenarios or
// criScenarios), so no row is there without a test behind it; and every
// scenario has its row.
func TestDocContainerRowsHaveTests(t *testing.T) {
	known := map[string]bool{}
	for _, s := range scenarios {
		known[s.Name] = true
	}
	for _, s := range criScenarios {
		known[s.Name] = true
	}
	rows := docRows(t)
	for name := range rows {
		assert.True(t, known[name], "docs/containers.md row %q is no scenario of the suite", name)
	}
	for name := range known {
		assert.Contains(t, rows, name, "scenario %q has no row in docs/containers.md", name)
	}
}

// checkDocCRIRows compares docs/containers.md's CRI rows with what this
// run saw;
// rows whose limit is the test's own (-8m) only where that is 8 MiB.
func checkDocCRIRows(t *testing.T) {
	t.Helper()
	rows := docRows(t)
	for _, l := range strings.Split(criTable(), "\n") {
		if !strings.HasPrefix(l, "| cri-") {
			continue
		}
		name := strings.TrimSpace(strings.Split(l, "|")[1])
		if strings.HasSuffix(name, "-8m") && selfMemlock() != 8<<20 {
			t.Logf("%s: this run inherits %s, docs/containers.md shows 8 MiB; not compared", name, fmtLimit(selfMemlock()))
			continue
		}
		assert.Equal(t, l, rows[name], "docs/containers.md's row for %s is not what the CRI suite saw: update it from this run", name)
	}
}

var criTermRows = map[string]string{}

func recordCRITerm(name string, code int, msg string) {
	tableMu.Lock()
	defer tableMu.Unlock()
	first, _, _ := strings.Cut(msg, "\n")
	criTermRows[name] = fmt.Sprintf("| %s | %d | %s |", name, code, strings.ReplaceAll(first, "|", "\\|"))
}

// criTermTable renders what TestCRITerminationMessages saw.
func criTermTable() string {
	tableMu.Lock()
	defer tableMu.Unlock()
	return criTermTableLocked()
}

func criTermTableLocked() string {
	if len(criTermRows) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("| case | exit status | termination message (first line) |\n|---|---|---|\n")
	for _, c := range criTermCases {
		if r, ok := criTermRows[c.Name]; ok {
			b.WriteString(r + "\n")
		}
	}
	return b.String()
}
