package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/creack/pty"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// explain's text is wrapped as doctor's is: no line of ncclrun's own words
// is wider than explainWidth, and a fix for every platform puts each
// platform on a line of its own. Nothing of the fix is lost or added (its
// alternatives start a line with "or", the "; or " of the JSON). The
// log lines it quotes (first:) and the hosts (seen:) stay whole.
func TestExplainWraps(t *testing.T) {
	logs, err := filepath.Glob(filepath.Join(corpusDir(t), "*.log"))
	require.NoError(t, err)
	require.NotEmpty(t, logs)
	seed := filepath.Join(corpusDir(t), "memlock-seed.log")
	for _, log := range logs {
		var stdout, stderr bytes.Buffer
		require.Equal(t, 0, run([]string{"ncclrun", "explain", log}, strings.NewReader(""), &stdout, &stderr), stderr.String())
		var jsonOut bytes.Buffer
		require.Equal(t, 0, run([]string{"ncclrun", "explain", "--json", log}, strings.NewReader(""), &jsonOut, &stderr))
		var js struct {
			Diagnoses []struct{ Fix, Cause string } `json:"diagnoses"`
		}
		require.NoError(t, json.Unmarshal(jsonOut.Bytes(), &js))
		var fixes []string
		fix := -1
		for _, l := range strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n") {
			switch {
			case strings.HasPrefix(l, "  fix:   "):
				fixes = append(fixes, l)
				fix = len(fixes) - 1
			case fix >= 0 && strings.HasPrefix(l, fixIndent):
				fixes[fix] += " " + l
			default:
				fix = -1
			}
			if strings.HasPrefix(l, "  first: ") || strings.HasPrefix(l, "  seen:  ") || strings.HasPrefix(l, "first failure: ") || strings.HasPrefix(l, "  where: ") {
				continue
			}
			assert.LessOrEqual(t, len(l), explainWidth, "%s: %q", filepath.Base(log), l)
		}
		require.Len(t, fixes, len(js.Diagnoses), log)
		for i, d := range js.Diagnoses {
			assert.Equal(t, strings.Fields(strings.ReplaceAll(d.Fix, "; or ", " or ")), strings.Fields(strings.TrimPrefix(fixes[i], "  fix:")), "%s: the fix, word for word", filepath.Base(log))
		}
		if log == seed {
			for _, p := range []string{"Docker: ", "Kubernetes: ", "Slurm: ", "hosts: "} {
				assert.Contains(t, stdout.String(), "\n"+fixIndent+p, "a line of its own")
			}
		}
	}
}

// explain with no FILE on a terminal says on stderr, in one line, what it
// reads, and reads it; on a pipe or a file it says nothing.
func TestExplainTerminalSaysWhatItWants(t *testing.T) {
	ptmx, tty, err := pty.Open()
	require.NoError(t, err)
	defer ptmx.Close()
	defer tty.Close()
	seed, err := os.ReadFile(filepath.Join(corpusDir(t), "memlock-seed.log"))
	require.NoError(t, err)
	first, _, _ := strings.Cut(string(seed), "\n")
	for _, l := range strings.Split(string(seed), "\n") {
		if strings.Contains(l, "ibv_reg_mr") {
			first = l
			break
		}
	}
	// Typed ahead: the line, then Ctrl-D (VEOF) at the start of a line.
	_, err = ptmx.Write([]byte(first + "\n\x04"))
	require.NoError(t, err)
	var stdout, stderr bytes.Buffer
	code := run([]string{"ncclrun", "explain"}, tty, &stdout, &stderr)
	require.Equal(t, 0, code, stderr.String())
	lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
	require.Len(t, lines, 1, stderr.String())
	assert.True(t, strings.HasPrefix(lines[0], "ncclrun: explain: "), lines[0])
	assert.Contains(t, lines[0], "Ctrl-D")
	assert.Contains(t, stdout.String(), "memlock:")

	stderr.Reset()
	require.Equal(t, 0, run([]string{"ncclrun", "explain"}, strings.NewReader(first+"\n"), &stdout, &stderr))
	assert.Empty(t, stderr.String(), "a pipe")
	devNull, err := os.Open(os.DevNull)
	require.NoError(t, err)
	defer devNull.Close()
	require.Equal(t, 0, run([]string{"ncclrun", "explain"}, devNull, &stdout, &stderr))
	assert.Empty(t, stderr.String(), "a character device that is no terminal")
}
