package lint

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestContractIDs: the finding ids and severities of docs/contract.md's
// lint table are exactly Rules.
func TestContractIDs(t *testing.T) {
	data, err := os.ReadFile("../docs/contract.md")
	require.NoError(t, err)
	loc := regexp.MustCompile(`(?s)\n## lint\n(.*?)\n## `).FindSubmatch(data)
	require.NotNil(t, loc, "docs/contract.md has a lint section")
	rows := regexp.MustCompile("(?m)^\\| `([a-z-]+)` \\| (error|warning|info) \\|").FindAllSubmatch(loc[1], -1)
	got := map[string]string{}
	for _, r := range rows {
		got[string(r[1])] = string(r[2])
	}
	want := map[string]string{}
	for _, r := range Rules() {
		want[r.ID] = r.Severity
	}
	assert.Equal(t, want, got)
}

// TestTable: a finding's severity is that of a row of the findings table
// for its id, and every row has a testdata manifest that makes it; the
// rows for findings made while reading are one per id; Rules gives an id
// the severity of its most severe row.
func TestTable(t *testing.T) {
	type key struct{ id, sev string }
	rows, read := map[key]bool{}, map[string]int{}
	for _, r := range table {
		assert.Contains(t, []string{Error, Warning, Info}, r.severity, r.id)
		if r.applies == nil {
			read[r.id]++
			key := key{r.id, r.severity}
			rows[key] = true
			continue
		}
		require.NotNil(t, r.line, r.id)
		require.NotNil(t, r.message, r.id)
		require.NotNil(t, r.fix, r.id)
		rows[key{r.id, r.severity}] = true
	}
	for id, n := range read {
		assert.Equal(t, 1, n, "%s has one row for findings made while reading", id)
	}
	seen := map[key]bool{}
	files, _ := filepath.Glob("testdata/*/*.*")
	for _, f := range files {
		if strings.Contains(f, "/bad/") || strings.Contains(f, "/golden/") {
			continue
		}
		rep := Paths([]string{f}, nil)
		for _, fd := range rep.Findings {
			k := key{fd.ID, fd.Severity}
			assert.True(t, rows[k], "%s: %s at %s is no row of the table", f, fd.ID, fd.Severity)
			seen[k] = true
		}
	}
	for k := range rows {
		assert.True(t, seen[k], "row %s at %s has a testdata manifest", k.id, k.sev)
	}
	sev := map[string]string{}
	for _, r := range Rules() {
		sev[r.ID] = r.Severity
	}
	assert.Equal(t, map[string]string{IDIPCLockInert: Error, IDNNPShell: Error, IDNoIPCLock: Error, IDUserNeedsSetid: Error,
		IDMemlockLimit: Error, IDNRIAnnotation: Error, IDPodCaps: Error, IDUserNamespace: Error,
		IDNcclrunUsage: Error, IDShmDefault: Warning, IDPodSecurity: Warning, IDNodeMemlock: Info}, sev)
}
