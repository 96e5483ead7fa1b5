package main

// explain's inputs beyond logs (docs/hangs.md "Across nodes"): a node's
// --report JSON, the JSON of a Job's pods (`kubectl get pods -o json`,
// their termination messages), and a directory of logs (one file a node).
// Each input is one node's view of a hang; explain merges them.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ncclrun/ncclrun/diagnosis"
	"github.com/ncclrun/ncclrun/nccllog"
)

// maxJSONInput bounds a report or pod list explain decodes.
const maxJSONInput = 64 << 20

// maxDirFiles bounds the logs explain reads from one directory.
const maxDirFiles = 100000

// jobInput collects each input's view of a hang.
type jobInput struct {
	views []diagnosis.HangView
	// lines are the reports' and pods' quoted first lines, each once,
	// fed to the matcher together by flush (at most maxQuoted bytes).
	lines  bytes.Buffer
	quoted map[string]bool
}

// maxQuoted bounds the quoted lines kept from reports and pods.
const maxQuoted = 8 << 20

// quote keeps one quoted line for the matcher, once.
func (ji *jobInput) quote(line string) {
	if line == "" || ji.quoted[line] || ji.lines.Len()+len(line) > maxQuoted {
		return
	}
	if ji.quoted == nil {
		ji.quoted = map[string]bool{}
	}
	ji.quoted[line] = true
	ji.lines.WriteString(line + "\n")
}

// flush feeds the quoted lines to m.
func (ji *jobInput) flush(m *diagnosis.Matcher) {
	_ = diagnosis.FeedReader(m, &ji.lines) // a bytes.Buffer returns no error
}

// expandDirs replaces a directory among names by its regular files, in
// name order (a shared log directory: one file a node or rank).
func expandDirs(names []string) ([]string, error) {
	var out []string
	for _, n := range names {
		if n == "-" {
			out = append(out, n)
			continue
		}
		st, err := os.Stat(n)
		if err != nil || !st.IsDir() {
			out = append(out, n)
			continue
		}
		ents, err := os.ReadDir(n)
		if err != nil {
			return nil, &usageError{fmt.Errorf("explain: %s: %w", n, err)}
		}
		var files []string
		for _, e := range ents {
			if e.Type().IsRegular() {
				files = append(files, filepath.Join(n, e.Name()))
			}
		}
		if len(files) > maxDirFiles {
			return nil, &usageError{fmt.Errorf("explain: %s: more than %d files", n, maxDirFiles)}
		}
		sort.Strings(files)
		out = append(out, files...)
	}
	return out, nil
}

// explainInput feeds one input to m: a log line by line (and to a hang
// scan of its own), a report or a pod list by what it carries. Each
// input ends a line, so the last line of one never joins the first of
// the next. An input that cannot be opened, read or decompressed, or that
// is bzip2, zstd or xz, is a usage error naming it.
func (ji *jobInput) explainInput(m *diagnosis.Matcher, name string, stdin io.Reader) error {
	in, err := nccllog.Open(name, stdin)
	if err != nil {
		var re *nccllog.ReadError
		if errors.As(err, &re) {
			return inputError(name, err)
		}
		return &usageError{fmt.Errorf("explain: %w", err)}
	}
	defer in.Close()
	br := bufio.NewReaderSize(in, 4096)
	if isJSONInput(br) {
		return ji.jsonInput(name, br)
	}
	hs := diagnosis.NewHangScan("", 0, 0)
	if err := diagnosis.FeedReader(m, io.TeeReader(br, hs)); err != nil {
		return inputError(name, err)
	}
	hs.Flush()
	ji.addView(hs.View())
	return nil
}

// isJSONInput reports whether the input starts (after blanks) with '{':
// no log line does.
func isJSONInput(br *bufio.Reader) bool {
	for i := 1; i <= 4096; i++ { // the reader's whole buffer
		b, err := br.Peek(i)
		if len(b) < i {
			return false
		}
		c := b[i-1]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			continue
		case err != nil:
			return false
		}
		return c == '{'
	}
	return false
}

// reportInput is what explain reads of a --report.
type reportInput struct {
	Diagnoses []struct {
		FirstLine string `json:"first_line"`
	} `json:"diagnoses"`
	HangView  *diagnosis.HangView `json:"hang_view"`
	Command   []string            `json:"command"`
	Preflight json.RawMessage     `json:"preflight"`
	// A pod list, or one pod.
	Kind  string     `json:"kind"`
	Items []podInput `json:"items"`
	podInput
}

// podInput is what explain reads of a pod: its name, node and the
// containers' termination messages.
type podInput struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		NodeName string `json:"nodeName"`
	} `json:"spec"`
	Status struct {
		ContainerStatuses []struct {
			State     containerState `json:"state"`
			LastState containerState `json:"lastState"`
		} `json:"containerStatuses"`
	} `json:"status"`
}

type containerState struct {
	Terminated *struct {
		Message string `json:"message"`
	} `json:"terminated"`
}

// jsonInput reads a report or a pod list (bounded by maxJSONInput).
func (ji *jobInput) jsonInput(name string, r io.Reader) error {
	var in reportInput
	lr := &io.LimitedReader{R: r, N: maxJSONInput + 1}
	if err := json.NewDecoder(lr).Decode(&in); err != nil {
		if lr.N <= 0 {
			return &usageError{fmt.Errorf("explain: %s: JSON input larger than %d MiB", displayName(name), maxJSONInput>>20)}
		}
		return &usageError{fmt.Errorf("explain: %s: not a report or a pod list: %w", displayName(name), err)}
	}
	switch {
	case in.Kind == "List" || in.Kind == "PodList" || len(in.Items) > 0:
		for _, p := range in.Items {
			ji.pod(p)
		}
	case in.Kind == "Pod":
		ji.pod(in.podInput)
	case in.Diagnoses == nil && in.Preflight == nil:
		return &usageError{fmt.Errorf("explain: %s: JSON that is neither a --report nor a pod list (kubectl get pods -o json)", displayName(name))}
	default:
		for _, d := range in.Diagnoses {
			ji.quote(d.FirstLine)
		}
		if v := in.HangView; v != nil {
			if v.World == 0 || v.PerNode == 0 {
				w, p := diagnosis.WorldFromCommand(in.Command)
				v.World, v.PerNode = max(v.World, w), max(v.PerNode, p)
			}
			ji.addView(*v)
		}
	}
	return nil
}

// pod reads one pod's termination messages: the hang view line, and the
// quoted first line of its diagnosis for the matcher.
func (ji *jobInput) pod(p podInput) {
	for _, cs := range p.Status.ContainerStatuses {
		for _, st := range []containerState{cs.State, cs.LastState} {
			if st.Terminated == nil || st.Terminated.Message == "" {
				continue
			}
			msg := st.Terminated.Message
			if v, ok := diagnosis.ParseTerminationView(msg); ok {
				if v.Node == "" {
					v.Node = p.Metadata.Name
				}
				ji.addView(v)
			}
			for _, l := range strings.Split(msg, "\n") {
				if rest, ok := strings.CutPrefix(l, "first: "); ok {
					ji.quote(rest)
				}
			}
		}
	}
}

// keptLineViews is how many views keep their records' lines for the
// evidence; the others are trimmed of them (HangView.Trim).
const keptLineViews = 16

// addView keeps one input's view, trimmed of what the merge does not need.
func (ji *jobInput) addView(v diagnosis.HangView) {
	v.Trim(len(ji.views) < keptLineViews)
	ji.views = append(ji.views, v)
}

// hang is the job's hang from every input's view.
func (ji *jobInput) hang() *diagnosis.Hang { return diagnosis.JobHang(ji.views) }
