package lint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// MaxFileSize bounds what lint reads of one input (16 MiB: Helm's output
// for a large chart is a few MiB), and MaxTotalSize what it reads of all
// the inputs of one run together (64 MiB). An input past either is
// refused unread where its size is known beforehand (a regular file).
const (
	MaxFileSize  = 16 << 20
	MaxTotalSize = 64 << 20
)

// MaxDocuments bounds the documents (JSON values of a stream) of one
// input: each costs a parser's set-up and a check, tens of microseconds,
// so that 16 MiB of empty ones would take minutes. A Helm chart renders
// hundreds; a cluster's objects come as one List.
const MaxDocuments = 50000

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

// count counts the findings of severity sev that are not silenced.
func (r Report) count(sev string) int {
	n := 0
	for _, f := range r.Findings {
		if f.Severity == sev && f.Silenced == nil {
			n++
		}
	}
	return n
}

// Silenced counts the findings an annotation silences.
func (r Report) Silenced() int {
	n := 0
	for _, f := range r.Findings {
		if f.Silenced != nil {
			n++
		}
	}
	return n
}

// HasError reports whether a finding that is not silenced is an error.
func (r Report) HasError() bool { return r.count(Error) > 0 }

// ErrSeverity is matched (errors.Is) by FailsAt's error for a severity
// that is not error, warning or info.
var ErrSeverity = errors.New("not a severity")

// FailsAt reports whether a finding that is not silenced is at least as
// severe as sev (error, warning or info): lint --fail-on.
func (r Report) FailsAt(sev string) (bool, error) {
	rank := map[string]int{Info: 0, Warning: 1, Error: 2}
	min, ok := rank[sev]
	if !ok {
		return false, fmt.Errorf("%q is not error, warning or info: %w", sev, ErrSeverity)
	}
	for _, f := range r.Findings {
		if f.Silenced == nil && rank[f.Severity] >= min {
			return true, nil
		}
	}
	return false, nil
}

// Check parses one input (YAML or JSON, several documents) and judges every
// container of every pod template and Compose service in it. name is the
// file name findings carry. Documents that are neither are skipped.
func Check(name string, r io.Reader) (Report, error) {
	data, err := read(name, r, MaxFileSize)
	if err != nil {
		return Report{}, err
	}
	return CheckBytes(name, data)
}

// read reads one input, up to limit bytes (MaxFileSize, or less where the
// run's MaxTotalSize leaves less). A regular file's size is looked at
// first, so a file past the limit is not read at all, and the buffer is
// allocated once.
func read(name string, r io.Reader, limit int64) ([]byte, error) {
	var b bytes.Buffer
	if f, ok := r.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
			if fi.Size() > limit {
				return nil, tooLarge(name, limit, fi.Size())
			}
			b.Grow(int(fi.Size()) + bytes.MinRead)
		}
	}
	if _, err := b.ReadFrom(io.LimitReader(r, limit+1)); err != nil {
		return nil, inputErrorf("%s: %v", name, err)
	}
	if int64(b.Len()) > limit {
		return nil, tooLarge(name, limit, -1)
	}
	return b.Bytes(), nil
}

// tooLarge is the refusal of an input past limit bytes; size is its size
// where known (a regular file), else -1.
func tooLarge(name string, limit, size int64) error {
	if size <= MaxFileSize && limit < MaxFileSize {
		return inputErrorf("%s: not read: the inputs of one run together are larger than %d MiB", name, MaxTotalSize>>20)
	}
	return inputErrorf("%s: larger than %d MiB", name, MaxFileSize>>20)
}

// CheckBytes is Check over data in memory. When a document does not
// parse, the report holds the documents before it, as Paths does.
func CheckBytes(name string, data []byte) (Report, error) {
	c := newChecker()
	err := c.input(name, data)
	return c.report(), err
}

// checker judges inputs one document at a time, so that only the
// findings (and the few objects a later input may still need) outlive a
// document's nodes: a run's memory is that of its largest document, not
// of all its inputs parsed at once.
type checker struct {
	objects []object
	// runtimes are the inputs' TrainingRuntimes by "Kind/name": a TrainJob
	// is judged with the one it names, from any input of the run.
	runtimes map[string]runtimeDoc
	errs     []error
}

// object is what one object (a Compose file, a Kubernetes object) gave,
// in input order; a TrainJob waits in job until every runtime is known.
type object struct {
	findings   []Finding
	containers []Container
	job        *yaml.Node
	file       string
}

func newChecker() *checker { return &checker{runtimes: map[string]runtimeDoc{}} }

// judged turns containers into findings; pod holds the findings of their
// pod templates.
func judged(cs []container, pod []Finding) object {
	if len(cs) == 0 && len(pod) == 0 {
		return object{}
	}
	o := object{findings: pod}
	for _, c := range cs {
		fs, cont := c.findings()
		o.findings = append(o.findings, fs...)
		o.containers = append(o.containers, cont)
	}
	return o
}

// input judges one input. A document that does not parse (or is refused:
// an alias bomb, a key named twice) ends the input, as it ends what
// kubectl apply reads of a file: the documents before it are judged, as
// kubectl applies them, and those after it are not read.
func (c *checker) input(name string, data []byte) error {
	found := map[string]runtimeDoc{}
	err := parse(name, data, func(d *yaml.Node) { c.document(name, d, found) })
	for k, rt := range found {
		if _, dup := c.runtimes[k]; !dup {
			c.runtimes[k] = rt
		}
	}
	return err
}

// document judges one document (the objects of a List one by one) and
// keeps its TrainingRuntimes in found, the first of each name.
func (c *checker) document(name string, d *yaml.Node, found map[string]runtimeDoc) {
	if isCompose(d) {
		c.add(judged(composeContainers(name, d), nil))
		return
	}
	for _, obj := range listed(d, 0) {
		switch k := str(get(obj, "kind")); k {
		case "TrainJob":
			c.objects = append(c.objects, object{job: obj, file: name})
			continue
		case "TrainingRuntime", "ClusterTrainingRuntime":
			key := k + "/" + str(path(obj, "metadata", "name"))
			if _, dup := found[key]; !dup {
				found[key] = runtimeDoc{name, obj}
			}
		}
		c.add(c.kube(name, obj, podTemplates(obj, 0)))
	}
}

// add keeps o unless it holds nothing (a document of another kind):
// an input of many such documents costs no memory per document.
func (c *checker) add(o object) {
	if o.findings != nil || o.containers != nil || o.job != nil {
		c.objects = append(c.objects, o)
	}
}

// kube judges the pod templates of one Kubernetes object.
func (c *checker) kube(name string, obj *yaml.Node, refs []podRef) object {
	own := annotationSilences(path(obj, "metadata", "annotations"))
	var cs []container
	var pod []Finding
	for _, p := range refs {
		s := own.with(annotationSilences(get(p.meta, "annotations")))
		k, f := kubeContainers(name, p)
		for i := range k {
			k[i].silence = s
		}
		s.apply(f)
		cs, pod = append(cs, k...), append(pod, f...)
	}
	misplaced := misplacedNRI(name, obj, refs)
	own.apply(misplaced)
	return judged(cs, append(pod, misplaced...))
}

// report judges the TrainJobs with the runtimes of every input and puts
// everything in input order.
func (c *checker) report() Report {
	rep := Report{Errors: c.errs}
	for _, o := range c.objects {
		if o.job != nil {
			o = c.kube(o.file, o.job, trainJobTemplates(o.file, o.job, c.runtimes))
		}
		rep.Findings = append(rep.Findings, o.findings...)
		rep.Containers = append(rep.Containers, o.containers...)
	}
	return rep
}

// parse reads YAML or JSON documents and hands each to fn as it is read;
// a document that is a list (a bare JSON array) hands over each of its
// mappings. A document whose aliases expand past its bound is refused.
func parse(name string, data []byte, fn func(*yaml.Node)) error {
	// A document past MaxNodes ends the input where it starts: the YAML
	// decoder reads only what comes before it.
	var dense *docNodes
	var next func(*yaml.Node) error
	if s := jsonStream(data); s != nil {
		next = s.next
	} else if d, ok := overNodes(data); ok {
		dense, next = &d, yamlDocuments(data[:d.off])
	} else {
		next = yamlDocuments(data)
	}
	docs, mappings, read := 0, 0, 0
	for {
		var doc yaml.Node
		err := next(&doc)
		if errors.Is(err, io.EOF) && dense != nil {
			return tooDense(name, dense.line, docs)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		var de *denseError
		if errors.As(err, &de) {
			return tooDense(name, de.line, docs)
		}
		if read++; read > MaxDocuments {
			return inputErrorf("%s: more than %d documents in one input: the first %d are checked, the rest is not read", name, MaxDocuments, MaxDocuments)
		}
		var je *jsonStreamError
		if errors.As(err, &je) {
			return inputErrorf("%s: not JSON: line %d: %s%s", name, je.line, je.err, after(docs))
		}
		if err != nil {
			by := 0 // lines before the JSON value it is in
			var se *shiftedError
			if errors.As(err, &se) {
				by = se.by
			}
			return inputErrorf("%s: not YAML: %s%s", name, yamlError(err, by, lines(data)), after(docs))
		}
		if len(doc.Content) == 0 {
			continue
		}
		own, k, first := ownDoc(doc.Content[0])
		if bomb, limit := aliasBomb(doc.Content[0], own); bomb {
			return inputErrorf("%s: not read: the document at line %d expands through its aliases to more than %d nodes%s", name, doc.Content[0].Line, limit, after(docs))
		}
		if k != nil {
			return inputErrorf("%s: not YAML: line %d: mapping key %q already defined at line %d%s", name, k.Line, truncateKey(k.Value), first.Line, after(docs))
		}
		top := deref(doc.Content[0])
		if top != nil && top.Kind == yaml.SequenceNode {
			for _, it := range items(top) {
				if it.Kind == yaml.MappingNode {
					docs, mappings = docs+1, mappings+1
					fn(it)
				}
			}
			if len(top.Content) > 0 && docs == 0 {
				return inputErrorf("%s: not a YAML or JSON manifest (no mapping at the top)", name)
			}
			continue
		}
		docs++
		if top != nil && top.Kind == yaml.MappingNode {
			mappings++
		}
		fn(doc.Content[0])
	}
	if docs > 0 && mappings == 0 {
		return inputErrorf("%s: not a YAML or JSON manifest (no mapping at the top)", name)
	}
	return nil
}

// yamlDocuments decodes the YAML documents of data one by one.
func yamlDocuments(data []byte) func(*yaml.Node) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	return func(doc *yaml.Node) error { return decode(dec, doc) }
}

// jsonValues is a stream of JSON objects one after the other (`jq
// '.items[]'`, NDJSON), which kubectl reads as one document each; YAML
// reads only the first. kubectl takes an input as such a stream once two
// values in a row decode as JSON, and so does lint; data that is not one
// is read as YAML (a single JSON object is YAML too).
type jsonValues struct {
	data   []byte
	spans  [][2]int // the values' byte ranges in data
	err    error    // what stopped the stream before the end, if anything
	errOff int
	// off is where the lines counted so far end, line how many there are:
	// each value's lines are counted once.
	off, line int
}

// jsonStreamError is a JSON syntax error after the values before it.
type jsonStreamError struct {
	line int
	err  string
}

func (e *jsonStreamError) Error() string { return fmt.Sprintf("line %d: %s", e.line, e.err) }

// jsonStream returns data's JSON values when it starts with two, nil
// otherwise. Only their byte ranges are kept: each is parsed when read.
func jsonStream(data []byte) *jsonValues {
	base := len(data) - len(bytes.TrimPrefix(data, []byte("\ufeff")))
	if !bytes.HasPrefix(bytes.TrimLeft(data[base:], " \t\r\n"), []byte("{")) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data[base:]))
	s := &jsonValues{data: data}
	for {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if len(s.spans) < 2 {
				return nil
			}
			s.err, s.errOff = err, base+int(dec.InputOffset())
			var se *json.SyntaxError
			if errors.As(err, &se) {
				s.errOff = base + int(se.Offset)
			}
			break
		}
		end := base + int(dec.InputOffset())
		s.spans = append(s.spans, [2]int{end - len(raw), end})
		if len(s.spans) > MaxDocuments {
			break // parse refuses the one past the bound
		}
	}
	if len(s.spans) < 2 {
		return nil
	}
	return s
}

// next parses the next value as YAML, its lines those of the input.
func (s *jsonValues) next(doc *yaml.Node) error {
	if len(s.spans) == 0 {
		if s.err != nil {
			end := max(min(s.errOff, len(s.data)), s.off)
			return &jsonStreamError{line: s.line + bytes.Count(s.data[s.off:end], []byte("\n")) + 1, err: oneLine(s.err.Error())}
		}
		return io.EOF
	}
	sp := s.spans[0]
	s.spans = s.spans[1:]
	s.line += bytes.Count(s.data[s.off:sp[0]], []byte("\n"))
	s.off = sp[0]
	if d, ok := overNodes(s.data[sp[0]:sp[1]]); ok {
		return &denseError{line: s.line + d.line}
	}
	if err := decode(yaml.NewDecoder(bytes.NewReader(s.data[sp[0]:sp[1]])), doc); err != nil {
		return &shiftedError{err: err, by: s.line}
	}
	shiftLines(doc, s.line)
	return nil
}

// denseError is a JSON value of the stream past MaxNodes, at line.
type denseError struct{ line int }

func (e *denseError) Error() string {
	return fmt.Sprintf("line %d: more than %d nodes", e.line, MaxNodes)
}

// tooDense is the refusal of the document at line, past MaxNodes, after
// docs documents.
func tooDense(name string, line, docs int) error {
	return inputErrorf("%s: not read: the document at line %d has more than %d nodes (a List: `jq -c '.items[]'` makes each object a document)%s", name, line, MaxNodes, after(docs))
}

// shiftedError is a YAML error in a value that starts by lines into the
// input.
type shiftedError struct {
	err error
	by  int
}

func (e *shiftedError) Error() string { return e.err.Error() }
func (e *shiftedError) Unwrap() error { return e.err }

// shiftLines adds by to the line of every node under n.
func shiftLines(n *yaml.Node, by int) {
	if by != 0 {
		eachOwn(n, func(n *yaml.Node) bool { n.Line += by; return true })
	}
}

// after says, for an input refused at a document other than its first,
// what became of the others: the ones before it are judged, the rest of
// the input is not read.
func after(docs int) string {
	switch docs {
	case 0:
		return ""
	case 1:
		return " (the document before it is checked, the rest of the input is not read)"
	}
	return fmt.Sprintf(" (the %d documents before it are checked, the rest of the input is not read)", docs)
}

// parserProblems are the problems yaml.v3's parser (not its scanner)
// reports. For those its error gives the 0-based line of the problem's
// context (the collection being parsed) or of the problem itself, and no
// line for the first: one less than the line an editor shows.
var parserProblems = []string{
	"did not find expected ',' or ']'",
	"did not find expected ',' or '}'",
	"did not find expected '-' indicator",
	"did not find expected <document start>",
	"did not find expected <stream-start>",
	"did not find expected key",
	"did not find expected node content",
	"found duplicate %TAG directive",
	"found duplicate %YAML directive",
	"found incompatible YAML document",
	"found undefined tag handle",
}

// lines is the number of lines of data, as an editor and YAML number
// them: LF, CRLF and a lone CR each end a line.
func lines(data []byte) int {
	n := bytes.Count(data, []byte("\n")) + bytes.Count(data, []byte("\r")) - bytes.Count(data, []byte("\r\n"))
	if len(data) > 0 && data[len(data)-1] != '\n' && data[len(data)-1] != '\r' {
		n++
	}
	return max(n, 1)
}

// yamlError is a yaml.v3 syntax error as "line N: problem", N the 1-based
// line an editor shows, by lines down the input for a value that starts
// there (at most last: the end of the input is on its last line).
func yamlError(err error, by, last int) string {
	msg := strings.TrimPrefix(oneLine(err.Error()), "yaml: ")
	n, problem := 0, msg
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		num, p, ok := strings.Cut(rest, ": ")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return msg
		}
		n, problem = v, p
	}
	if slices.Contains(parserProblems, problem) {
		n++
	}
	if n == 0 {
		return msg
	}
	return fmt.Sprintf("line %d: %s", min(n+by, last), problem)
}

// decode is dec.Decode with the panics yaml.v3 has on a few malformed
// inputs turned into errors: a bad file is an input error, never a crash.
// Only the decoding is covered: a panic in lint's own judging is a bug,
// and crashes as one.
func decode(dec *yaml.Decoder, doc *yaml.Node) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%v", p)
		}
	}()
	return dec.Decode(doc)
}

// ownDoc walks the nodes written in document n once (aliases not
// followed: an anchor is checked where it stands): it returns their number
// (aliasBomb's measure) and the first mapping that names a scalar key
// twice, as its second key and its first. kubectl and Compose refuse such
// a file, so lint does not judge one of its values.
func ownDoc(n *yaml.Node) (nodes int, dup, first *yaml.Node) {
	eachOwn(n, func(n *yaml.Node) bool {
		nodes++
		if dup != nil || n.Kind != yaml.MappingNode {
			return true
		}
		seen := make(map[string]*yaml.Node, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode {
				continue
			}
			if f, ok := seen[k.Value]; ok {
				dup, first = k, f
				break
			}
			seen[k.Value] = k
		}
		return true
	})
	return nodes, dup, first
}

// truncateKey shortens a key quoted in an error to one short line.
func truncateKey(s string) string {
	const max = 40
	if len(s) <= max {
		return s
	}
	for i := max; i > 0; i-- {
		if utf8.RuneStart(s[i]) {
			return s[:i] + "..."
		}
	}
	return "..."
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// Paths checks files, directories (recursively: *.yaml, *.yml, *.json, in
// name order, symlinks to regular files followed, each file once) and "-"
// (stdin, named "<stdin>"), each input once, in order.
func Paths(paths []string, stdin io.Reader) Report {
	c := newChecker()
	var total int64
	check := func(name string, r io.Reader) {
		data, err := read(name, r, min(MaxFileSize, MaxTotalSize-total))
		if err == nil {
			total += int64(len(data))
			err = c.input(name, data)
		}
		if err != nil {
			c.errs = append(c.errs, err)
		}
	}
	file := func(p string) {
		f, err := os.Open(p)
		if err != nil {
			c.errs = append(c.errs, inputErrorf("%s: %s", p, reason(err)))
			return
		}
		defer f.Close()
		check(p, f)
	}
	for _, p := range paths {
		if p == "-" {
			check("<stdin>", stdin)
			continue
		}
		fi, err := os.Stat(p)
		if err != nil {
			c.errs = append(c.errs, inputErrorf("%s: %s", p, reason(err)))
			continue
		}
		if !fi.IsDir() {
			file(p)
			continue
		}
		files, errs := manifests(p)
		c.errs = append(c.errs, errs...)
		for _, f := range files {
			file(f)
		}
	}
	return c.report()
}

// manifests lists the manifests of directory dir, recursively, in name
// order: regular files and symlinks to regular files (a ConfigMap volume,
// a repository of links) named *.yaml, *.yml or *.json. A directory below
// dir whose name starts with a dot is not read (.git, .github, and a
// ConfigMap volume's ..TIMESTAMP directory, whose files its links name).
// A symlink to a directory is not followed (it may loop), nor one to a
// FIFO, a device or anything else that is not a regular file; a file
// reached under two names is read once, under the first. A manifest's
// link that does not resolve is an error.
func manifests(dir string) (files []string, errs []error) {
	// A directory named through a symlink (manifests -> deploy/k8s) is
	// walked: WalkDir would not descend into the link itself.
	if fi, err := os.Lstat(dir); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		dir += string(filepath.Separator)
	}
	err := filepath.WalkDir(dir, func(fp string, d fs.DirEntry, err error) error {
		if err != nil {
			errs = append(errs, inputErrorf("%s: %s", fp, reason(err)))
			return nil
		}
		if d.IsDir() && fp != dir && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
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
