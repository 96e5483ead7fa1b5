package examples

import (
	"bytes"
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

var (
	lintPromise   = regexp.MustCompile(`(?m)^# ncclrun lint: ([a-z, -]+)`)
	lintSilences  = regexp.MustCompile(`(?m)^# ncclrun lint silences: ([a-z, -]+)`)
	doNotCopyMark = []byte("DO NOT COPY")
)

// promised is the ids a "# ncclrun lint...:" comment lists, sorted
// ("clean": none).
func promised(re *regexp.Regexp, data []byte) []string {
	want := []string{}
	if m := re.FindSubmatch(data); m != nil {
		for _, id := range strings.Split(string(m[1]), ",") {
			if id = strings.TrimSpace(id); id != "" && id != "clean" {
				want = append(want, id)
			}
		}
	}
	sort.Strings(want)
	return want
}

// manifests lists the YAML files of examples/.
func manifests(t *testing.T) []string {
	var files []string
	require.NoError(t, filepath.WalkDir(".", func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) {
			files = append(files, p)
		}
		return err
	}))
	require.NotEmpty(t, files)
	return files
}

// TestExamplesLint: every manifest here lints with exactly the findings
// its "# ncclrun lint:" comment promises ("clean": none), and silences
// exactly those its "# ncclrun lint silences:" comment lists.
func TestExamplesLint(t *testing.T) {
	for _, f := range manifests(t) {
		t.Run(f, func(t *testing.T) {
			data, err := os.ReadFile(f)
			require.NoError(t, err)
			require.Regexp(t, lintPromise, string(data), "%s says what `ncclrun lint` finds in it (# ncclrun lint: ids|clean)", f)
			rep, err := lint.CheckBytes(f, data)
			require.NoError(t, err)
			require.NotEmpty(t, rep.Containers)
			got, silenced := map[string]bool{}, map[string]bool{}
			for _, fd := range rep.Findings {
				if fd.Silenced != nil {
					silenced[fd.ID] = true
					assert.NotEmpty(t, fd.Silenced.Reason, "%s: a silenced finding says why", fd.ID)
					continue
				}
				got[fd.ID] = true
			}
			assert.Equal(t, promised(lintPromise, data), keys(got))
			assert.Equal(t, promised(lintSilences, data), keys(silenced))
		})
	}
}

func keys(m map[string]bool) []string {
	out := []string{}
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestRecommendedExamplesFailOnWarning: the manifests recommended here
// (all but those marked DO NOT COPY) pass `ncclrun lint --fail-on warning
// examples/`: no input error (exit 2) and no finding at warning or above
// (exit 1), their accepted trade-offs silenced with a reason.
func TestRecommendedExamplesFailOnWarning(t *testing.T) {
	var recommended []string
	for _, f := range manifests(t) {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		if !bytes.Contains(data, doNotCopyMark) {
			recommended = append(recommended, f)
		}
	}
	require.Greater(t, len(recommended), 5)
	rep := lint.Paths(recommended, nil)
	require.Empty(t, rep.Errors)
	fails, err := rep.FailsAt(lint.Warning)
	require.NoError(t, err)
	for _, f := range rep.Findings {
		if f.Silenced == nil && f.Severity != lint.Info {
			t.Errorf("%s:%d: %s %s", f.File, f.Line, f.Severity, f.ID)
		}
	}
	assert.False(t, fails, "ncclrun lint --fail-on warning exits 0 on the recommended examples")
	assert.NotZero(t, rep.Silenced())
}
