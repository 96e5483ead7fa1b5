package examples

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ncclrun/ncclrun/lint"
)

var lintPromise = regexp.MustCompile(`(?m)^# ncclrun lint: ([a-z, -]+)`)

// TestExamplesLint: every manifest here lints with exactly the findings
// its "# ncclrun lint:" comment promises ("clean": none).
func TestExamplesLint(t *testing.T) {
	var files []string
	require.NoError(t, filepath.WalkDir(".", func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) {
			files = append(files, p)
		}
		return err
	}))
	require.NotEmpty(t, files)
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			data, err := os.ReadFile(f)
			require.NoError(t, err)
			m := lintPromise.FindSubmatch(data)
			require.NotNil(t, m, "%s says what `ncclrun lint` finds in it (# ncclrun lint: ids|clean)", f)
			want := []string{}
			for _, id := range strings.Split(string(m[1]), ",") {
				if id = strings.TrimSpace(id); id != "" && id != "clean" {
					want = append(want, id)
				}
			}
			sort.Strings(want)
			rep, err := lint.CheckBytes(f, data)
			require.NoError(t, err)
			require.NotEmpty(t, rep.Containers)
			got := map[string]bool{}
			for _, fd := range rep.Findings {
				got[fd.ID] = true
			}
			ids := []string{}
			for id := range got {
				ids = append(ids, id)
			}
			sort.Strings(ids)
			assert.Equal(t, want, ids)
		})
	}
}
