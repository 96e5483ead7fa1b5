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
	"syscall"

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

// ErrSeverity is matched (errors.Is) by FailsAt's error for a severity
// that is not error, warning or info.
var ErrSeverity = errors.New("not a severity")

// FailsAt reports whether a finding is at least as severe as sev (error,
// warning or info): lint --fail-on.
func (r Report) FailsAt(sev string) (bool, error) {
	rank := map[string]int{Info: 0, Warning: 1, Error: 2}
	min, ok := rank[sev]
	if !ok {
		return false, fmt.Errorf("%q is not error, warning or info: %w", sev, ErrSeverity)
	}
	for _, f := range r.Findings {
		if rank[f.Severity] >= min {
			return true, nil
		}
	}
	return false, nil
}

// Check parses one input (YAML or JSON, several documents) and judges every
// container of every pod template and Compose service in it. name is the
// file name findings carry. Documents that are neither are skipped.
func Check(name string, r io.Reader) (Report, error) {
	data, err := read(name, r)
	if err != nil {
		return Report{}, err
	}
	return CheckBytes(name, data)
}

// read reads one input, up to MaxFileSize.
func read(name string, r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxFileSize+1))
	if err != nil {
		return nil, inputErrorf("%s: %v", name, err)
	}
	if len(data) > MaxFileSize {
		return nil, inputErrorf("%s: larger than %d MiB", name, MaxFileSize>>20)
	}
	return data, nil
}

// CheckBytes is Check over data in memory.
func CheckBytes(name string, data []byte) (Report, error) {
	docs, err := parse(name, data)
	if err != nil {
		return Report{}, err
	}
	return judge([]input{{name, docs}}), nil
}

// input is one parsed file: its Kubernetes objects and Compose documents.
type input struct {
	name string
	docs []*yaml.Node
}

// parse reads YAML or JSON documents; a document that is a list (a bare
// JSON array) contributes each of its mappings.
func parse(name string, data []byte) (docs []*yaml.Node, err error) {
	defer func() {
		// yaml.v3 panics on a few malformed inputs; a bad file is an
		// input error, never a crash.
		if p := recover(); p != nil {
			docs, err = nil, inputErrorf("%s: not YAML: %v", name, p)
		}
	}()
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, inputErrorf("%s: not YAML: %s", name, oneLine(err.Error()))
		}
		if len(doc.Content) == 0 {
			continue
		}
		if bomb, limit := aliasBomb(doc.Content[0]); bomb {
			return nil, inputErrorf("%s: not read: the document at line %d expands through its aliases to more than %d nodes", name, doc.Content[0].Line, limit)
		}
		top := deref(doc.Content[0])
		if top != nil && top.Kind == yaml.SequenceNode {
			for _, it := range items(top) {
				if it.Kind == yaml.MappingNode {
					docs = append(docs, it)
				}
			}
			if len(top.Content) > 0 && len(docs) == 0 {
				return nil, inputErrorf("%s: not a YAML or JSON manifest (no mapping at the top)", name)
			}
			continue
		}
		docs = append(docs, doc.Content[0])
	}
	if len(docs) > 0 && !anyMapping(docs) {
		return nil, inputErrorf("%s: not a YAML or JSON manifest (no mapping at the top)", name)
	}
	return docs, nil
}

// add judges containers; pod holds the findings of their pod templates.
func (r *Report) add(cs []container, pod []Finding) {
	r.Findings = append(r.Findings, pod...)
	for _, c := range cs {
		fs, cont := c.findings()
		r.Findings = append(r.Findings, fs...)
		r.Containers = append(r.Containers, cont)
	}
}

// judge checks every container of every input (the objects of a List one
// by one); a TrainJob is judged with
// the runtime it names when any input holds that runtime.
func judge(ins []input) Report {
	var rep Report
	runtimes := trainingRuntimes(ins)
	for _, in := range ins {
		for _, d := range in.docs {
			if isCompose(d) {
				rep.add(composeContainers(in.name, d), nil)
				continue
			}
			for _, obj := range listed(d, 0) {
				refs := podTemplates(obj, 0)
				if str(get(obj, "kind")) == "TrainJob" {
					refs = trainJobTemplates(in.name, obj, runtimes)
				}
				var cs []container
				var pod []Finding
				for _, p := range refs {
					c, f := kubeContainers(in.name, p)
					cs, pod = append(cs, c...), append(pod, f...)
				}
				rep.add(cs, append(pod, misplacedNRI(in.name, obj, refs)...))
			}
		}
	}
	return rep
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
// name order, symlinks to regular files followed, each file once) and "-"
// (stdin, named "<stdin>"), each input once, in order.
func Paths(paths []string, stdin io.Reader) Report {
	var errs []error
	var ins []input
	merge := func(name string, data []byte, err error) {
		if err == nil {
			var docs []*yaml.Node
			if docs, err = parse(name, data); err == nil {
				ins = append(ins, input{name, docs})
			}
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	for _, p := range paths {
		if p == "-" {
			data, err := read("<stdin>", stdin)
			merge("<stdin>", data, err)
			continue
		}
		fi, err := os.Stat(p)
		if err != nil {
			errs = append(errs, inputErrorf("%s: %s", p, reason(err)))
			continue
		}
		if !fi.IsDir() {
			data, err := readFile(p)
			merge(p, data, err)
			continue
		}
		files, werrs := manifests(p)
		errs = append(errs, werrs...)
		for _, f := range files {
			data, err := readFile(f)
			merge(f, data, err)
		}
	}
	rep := judge(ins)
	rep.Errors = errs
	return rep
}

func readFile(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, inputErrorf("%s: %s", p, reason(err))
	}
	defer f.Close()
	return read(p, f)
}

// manifests lists the manifests of directory dir, recursively, in name
// order: regular files and symlinks to regular files (a ConfigMap volume,
// a repository of links) named *.yaml, *.yml or *.json. A symlink to a
// directory is not followed (it may loop), nor one to a FIFO, a device or
// anything else that is not a regular file; a file reached under two names
// is read once, under the first. A manifest's link that does not resolve is
// an error.
func manifests(dir string) (files []string, errs []error) {
	err := filepath.WalkDir(dir, func(fp string, d fs.DirEntry, err error) error {
		if err != nil {
			errs = append(errs, inputErrorf("%s: %s", fp, reason(err)))
			return nil
		}
		switch strings.ToLower(filepath.Ext(fp)) {
		case ".yaml", ".yml", ".json":
		default:
			return nil
		}
		switch {
		case d.Type().IsRegular():
			files = append(files, fp)
		case d.Type()&fs.ModeSymlink != 0:
			fi, err := os.Stat(fp)
			switch {
			case err != nil:
				errs = append(errs, inputErrorf("%s: %s", fp, reason(err)))
			case fi.Mode().IsRegular():
				files = append(files, fp)
			}
		}
		return nil
	})
	if err != nil {
		errs = append(errs, inputErrorf("%s: %s", dir, reason(err)))
	}
	sort.Strings(files)
	return once(files), errs
}

// once drops the names of a file already listed under an earlier name
// (a symlink and its target in the same tree).
func once(files []string) []string {
	type id struct{ dev, ino uint64 }
	seen := map[id]bool{}
	out := files[:0]
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				k := id{uint64(st.Dev), st.Ino}
				if seen[k] {
					continue
				}
				seen[k] = true
			}
		}
		out = append(out, f)
	}
	return out
}

// reason is err's cause without the path os already put in it.
func reason(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}
