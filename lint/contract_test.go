package lint

import (
	"os"
	"regexp"
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
	for _, r := range Rules {
		want[r.ID] = r.Severity
	}
	assert.Equal(t, want, got)
}
