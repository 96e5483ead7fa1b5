package lint

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// MaxFileSize bounds what lint reads of one input (64 MiB).
const MaxFileSize = 64 << 20

// ErrInput is matched (errors.Is) by the errors of inputs that could not
// be read or parsed (exit status 2).
var ErrInput = errors.New("bad input")

// inputError is one input's problem: "PATH: why".
type inputError struct{ msg string }

func (e *inputError) Error() string        { return e.msg }
func (e *inputError) Is(target error) bool { return target == ErrInput }

func inputErrorf(format string, args ...any) error {
	return &inputError{fmt.Sprintf(format, args...)}
}

// Report is what lint found over all its inputs.
type Report struct {
	Findings   []Finding
	Containers []Container
	// Errors are inputs that could not be read or parsed, one line each;
	// the other inputs were still checked.
	Errors []error
}

// count counts the findings of severity sev.
func (r Report) count(sev string) int {
	n := 0
	for _, f := range r.Findings {
		if f.Severity == sev {
			n++
		}
	}
	return n
}

// HasError reports whether a finding is an error.
func (r Report) HasError() bool { return r.count(Error) > 0 }

// Check parses one input (YAML or JSON, several documents) and judges every
// container of every pod template and Compose service in it. name is the
// file name findings carry. Documents that are neither are skipped.
func Check(name string, r io.Reader) (Report, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxFileSize+1))
	if err != nil {
		return Report{}, inputErrorf("%s: %v", name, err)
	}
	if len(data) > MaxFileSize {
		return Report{}, inputErrorf("%s: larger than %d MiB", name, MaxFileSize>>20)
	}
	return CheckBytes(name, data)
}

// CheckBytes is Check over data in memory.
func CheckBytes(name string, data []byte) (rep Report, err error) {
	defer func() {
		// yaml.v3 panics on a few malformed inputs; a bad file is an
		// input error, never a crash.
		if p := recover(); p != nil {
			rep, err = Report{}, inputErrorf("%s: not YAML: %v", name, p)
		}
	}()
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	var docs []*yaml.Node
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Report{}, inputErrorf("%s: not YAML: %s", name, oneLine(err.Error()))
		}
		if len(doc.Content) > 0 {
			docs = append(docs, doc.Content[0])
		}
	}
	if len(docs) > 0 && !anyMapping(docs) {
		return Report{}, inputErrorf("%s: not a YAML or JSON manifest (no mapping at the top)", name)
	}
	for _, d := range docs {
		var cs []container
		if isCompose(d) {
			cs = composeContainers(name, d)
		} else {
			for _, p := range podTemplates(d, 0) {
				cs = append(cs, kubeContainers(name, p)...)
			}
		}
		for _, c := range cs {
			fs, cont := c.findings()
			rep.Findings = append(rep.Findings, fs...)
			rep.Containers = append(rep.Containers, cont)
		}
	}
	return rep, nil
}

func anyMapping(docs []*yaml.Node) bool {
	for _, d := range docs {
		if d = deref(d); d != nil && d.Kind == yaml.MappingNode {
			return true
		}
	}
	return false
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// Paths checks files, directories (recursively: *.yaml, *.yml, *.json, in
// name order) and "-" (stdin, named "<stdin>"), each input once, in order.
func Paths(paths []string, stdin io.Reader) Report {
	var rep Report
	merge := func(r Report, err error) {
		if err != nil {
			rep.Errors = append(rep.Errors, err)
			return
		}
		rep.Findings = append(rep.Findings, r.Findings...)
		rep.Containers = append(rep.Containers, r.Containers...)
	}
	for _, p := range paths {
		if p == "-" {
			merge(Check("<stdin>", stdin))
			continue
		}
		fi, err := os.Stat(p)
		if err != nil {
			rep.Errors = append(rep.Errors, inputErrorf("%s: %s", p, reason(err)))
			continue
		}
		if !fi.IsDir() {
			merge(checkFile(p))
			continue
		}
		var files []string
		err = filepath.WalkDir(p, func(fp string, d fs.DirEntry, err error) error {
			if err != nil {
				rep.Errors = append(rep.Errors, inputErrorf("%s: %s", fp, reason(err)))
				return nil
			}
			if d.Type().IsRegular() {
				switch strings.ToLower(filepath.Ext(fp)) {
				case ".yaml", ".yml", ".json":
					files = append(files, fp)
				}
			}
			return nil
		})
		if err != nil {
			rep.Errors = append(rep.Errors, inputErrorf("%s: %s", p, reason(err)))
		}
		sort.Strings(files)
		for _, f := range files {
			merge(checkFile(f))
		}
	}
	return rep
}

func checkFile(p string) (Report, error) {
	f, err := os.Open(p)
	if err != nil {
		return Report{}, inputErrorf("%s: %s", p, reason(err))
	}
	defer f.Close()
	return Check(p, f)
}

// reason is err's cause without the path os already put in it.
func reason(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}
