package lint

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/ncclrun/ncclrun/internal/pinrule"
	"github.com/ncclrun/ncclrun/internal/units"
)

// The pod annotation keys of the NRI ulimit-adjuster plugin (containerd/nri
// plugins/ulimit-adjuster), each followed by a container's name. The plugin
// looks up the current key first and takes the deprecated one only when
// the current key is absent.
const (
	nriKey    = "ulimits.noderesource.dev/container."
	nriOldKey = "ulimits.nri.containerd.io/container."
)

// nriTypes are the resource names the plugin accepts, after it upper-cases
// the type and strips one "RLIMIT_" prefix (setrlimit(2)'s names).
var nriTypes = []string{"AS", "CORE", "CPU", "DATA", "FSIZE", "LOCKS", "MEMLOCK", "MSGQUEUE", "NICE", "NOFILE",
	"NPROC", "RSS", "RTPRIO", "RTTIME", "SIGPENDING", "STACK"}

func nriType(t string) (string, bool) {
	n := strings.TrimPrefix(strings.ToUpper(t), "RLIMIT_")
	for _, v := range nriTypes {
		if v == n {
			return "RLIMIT_" + n, true
		}
	}
	return "", false
}

// nriValue is one soft or hard value as written.
type nriValue struct {
	set  bool   // the field is there (and not null)
	ok   bool   // it decodes as the plugin's uint64
	v    uint64 // the value when ok
	text string // as written, when not ok
}

// nriEntry is one element of the annotation's list.
type nriEntry struct {
	typ        string // as written
	typSet     bool
	canon      string // RLIMIT_<NAME>; "" when the plugin rejects typ
	soft, hard nriValue
	unknown    [][2]string // fields the plugin does not read, with their values
}

// nriAnnotation is one annotation as the plugin reads it for one container.
type nriAnnotation struct {
	key, name string // the key and the container name it ends with
	line      int
	entries   []nriEntry
	// fails: the plugin returns an error and the runtime does not create
	// the container; problems say why (one clause each), and the other
	// mistakes that leave the container with a useless limit.
	fails    bool
	problems []string
	// memlock is the RLIMIT_MEMLOCK the container gets, when the
	// annotation sets one and the plugin accepts it.
	memlock *pinrule.Limit
	// memlockZero: the annotation gives memlock 0 (written, or a missing
	// field the plugin reads as 0).
	memlockZero bool
}

// readNRI decodes an annotation value the way the plugin does: YAML turned
// into JSON, then decoded into a list of {type string; soft, hard uint64}
// (fields matched case-insensitively, others ignored, a missing field 0).
// Then every type must be a known name and hard must not be below soft.
func readNRI(key, name string, line int, value string) nriAnnotation {
	a := nriAnnotation{key: key, name: name, line: line}
	if strings.TrimSpace(value) == "" {
		return a
	}
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(value), &doc); err != nil {
		a.fail("its value is not YAML (" + oneLine(err.Error()) + ")")
		return a
	}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return a
		}
		root = root.Content[0]
	}
	// The value is a document of its own: the manifest's alias bound
	// (aliasBomb) did not look into it.
	if bomb, limit := aliasBomb(root, ownNodes(root)); bomb {
		a.fail(fmt.Sprintf("its value expands through its aliases to more than %d nodes", limit))
		return a
	}
	root = deref(root)
	if root == nil || root.ShortTag() == "!!null" {
		return a
	}
	if root.Kind != yaml.SequenceNode {
		a.fail("its value is not a YAML list of {type, soft, hard}")
		return a
	}
	for _, it := range root.Content {
		it = deref(it)
		var e nriEntry
		switch {
		case it == nil || it.ShortTag() == "!!null":
		case it.Kind != yaml.MappingNode:
			a.fail(fmt.Sprintf("the list item %q is not a {type, soft, hard} mapping", oneLine(it.Value)))
			continue
		}
		for _, kv := range pairs(it) {
			k, v := kv[0].Value, kv[1]
			switch {
			case strings.EqualFold(k, "type"):
				if v.ShortTag() == "!!null" {
					continue
				}
				e.typ, e.typSet = v.Value, true
				if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!str" {
					a.fail(fmt.Sprintf("type %q is not a string", oneLine(v.Value)))
				}
			case strings.EqualFold(k, "soft"):
				e.soft = nriNumber(v)
			case strings.EqualFold(k, "hard"):
				e.hard = nriNumber(v)
			default:
				e.unknown = append(e.unknown, [2]string{k, str(v)})
			}
		}
		a.entries = append(a.entries, e)
	}
	for _, e := range a.entries {
		for _, f := range []struct {
			name string
			v    nriValue
		}{{"soft", e.soft}, {"hard", e.hard}} {
			if f.v.set && !f.v.ok {
				a.fail(fmt.Sprintf("%s: %s is not an unsigned 64-bit integer (unlimited is %d)", f.name, f.v.text, uint64(math.MaxUint64)))
			}
		}
	}
	for i := range a.entries {
		e := &a.entries[i]
		canon, ok := nriType(e.typ)
		e.canon = canon
		switch {
		case ok:
		case !e.typSet && len(e.unknown) > 0:
			a.fail(fmt.Sprintf("an item has no type (the plugin does not read %s) and the empty type fails to parse", quoteKeys(e.unknown)))
		case !e.typSet:
			a.fail("an item has no type and the empty type fails to parse")
		default:
			a.fail(fmt.Sprintf("type %q is not a resource name the plugin knows (RLIMIT_MEMLOCK, memlock, ...)", e.typ))
		}
	}
	for _, e := range a.entries {
		decoded := (e.soft.ok || !e.soft.set) && (e.hard.ok || !e.hard.set)
		if e.canon != "" && decoded && e.hard.v < e.soft.v {
			a.fail(fmt.Sprintf("%s has hard %d below soft %d", e.canon, e.hard.v, e.soft.v))
		}
	}
	for _, e := range a.entries {
		if e.canon == "" {
			continue
		}
		var missing []string
		if !e.soft.set {
			missing = append(missing, "soft")
		}
		if !e.hard.set {
			missing = append(missing, "hard")
		}
		if len(missing) > 0 {
			a.problems = append(a.problems, fmt.Sprintf("%s has no %s, which the plugin reads as 0", e.canon, strings.Join(missing, " and no ")))
		}
		if e.canon == "RLIMIT_MEMLOCK" && (e.soft.v == 0 || e.hard.v == 0) && (!e.soft.set || e.soft.ok) && (!e.hard.set || e.hard.ok) {
			a.memlockZero = true
			a.problems = append(a.problems, "a memlock of 0 makes every memory registration fail with EPERM")
		}
	}
	if a.fails {
		return a
	}
	for _, e := range a.entries {
		if e.canon == "RLIMIT_MEMLOCK" {
			l := pinrule.Limit{Soft: u64Limit(e.soft.v), Hard: u64Limit(e.hard.v)}
			a.memlock = &l // the last one wins, as the runtime applies them in order
		}
	}
	return a
}

func (a *nriAnnotation) fail(why string) {
	a.fails = true
	a.problems = append(a.problems, why)
}

// nriNumber reads a soft or hard value as encoding/json decodes a uint64:
// an integer from 0 to 18446744073709551615; a string, a negative number,
// a fraction or an exponent is an error. null leaves it 0.
func nriNumber(v *yaml.Node) nriValue {
	if v.ShortTag() == "!!null" {
		return nriValue{}
	}
	out := nriValue{set: true, text: oneLine(v.Value)}
	if v.Kind == yaml.ScalarNode && v.ShortTag() == "!!int" {
		if n, err := strconv.ParseUint(strings.TrimPrefix(v.Value, "+"), 0, 64); err == nil {
			out.ok, out.v = true, n
		}
	}
	if v.Kind == yaml.ScalarNode && v.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 {
		out.text = strconv.Quote(v.Value)
	}
	return out
}

func u64Limit(x uint64) int64 {
	if x >= 1<<63 {
		return pinrule.Unlimited
	}
	return int64(x)
}

func quoteKeys(kv [][2]string) string {
	var ks []string
	for _, x := range kv {
		ks = append(ks, "`"+x[0]+"`")
	}
	return strings.Join(ks, ", ")
}

// corrected is the annotation the plugin would accept, for the fix: each
// type by its RLIMIT_ name (a misspelled one by the nearest name; a type
// written under another field by that value), a negative or written-out
// size as its number (negative: unlimited), a missing value as the other
// one, memlock 0 as unlimited, hard raised to soft.
func (a nriAnnotation) corrected(name string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "metadata:\n  annotations:\n    %s%s: |\n", nriKey, name)
	entries := a.entries
	if len(entries) == 0 {
		entries = []nriEntry{{canon: "RLIMIT_MEMLOCK"}}
	}
	for _, e := range entries {
		typ := e.canon
		if typ == "" {
			typ = guessType(e)
		}
		fix := func(v nriValue) (uint64, bool) {
			switch {
			case v.ok:
				return v.v, true
			case !v.set:
				return 0, false
			}
			t := strings.Trim(v.text, `"`)
			if strings.HasPrefix(t, "-") {
				return math.MaxUint64, true
			}
			if n, err := units.ParseSize(t); err == nil {
				if n < 0 {
					return math.MaxUint64, true
				}
				return uint64(n), true
			}
			if f, err := strconv.ParseFloat(t, 64); err == nil && f >= 0 && f < math.MaxUint64 {
				return uint64(f), true
			}
			return math.MaxUint64, true
		}
		soft, sok := fix(e.soft)
		hard, hok := fix(e.hard)
		switch {
		case !sok && !hok:
			soft, hard = math.MaxUint64, math.MaxUint64
			if typ != "RLIMIT_MEMLOCK" {
				soft, hard = 0, 0
			}
		case !sok:
			soft = hard
		case !hok:
			hard = soft
		}
		if typ == "RLIMIT_MEMLOCK" && (soft == 0 || hard == 0) {
			soft, hard = math.MaxUint64, math.MaxUint64
		}
		if hard < soft {
			hard = soft
		}
		fmt.Fprintf(&b, "      - type: %s\n        soft: %d\n        hard: %d\n", typ, soft, hard)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// guessType is the name an entry the plugin rejects most likely meant.
func guessType(e nriEntry) string {
	for _, kv := range e.unknown {
		if c, ok := nriType(kv[1]); ok {
			return c
		}
	}
	if e.typSet {
		t := strings.TrimPrefix(strings.ToUpper(e.typ), "RLIMIT_")
		best, dist := "", 3
		for _, v := range nriTypes {
			if d := editDistance(t, v); d < dist {
				best, dist = v, d
			}
		}
		if best != "" {
			return "RLIMIT_" + best
		}
	}
	return "RLIMIT_MEMLOCK"
}

// editDistance is Levenshtein's distance between two short names.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// podNRI reads every ulimit-adjuster annotation of a pod template: for
// each container name, the one the plugin takes (the current key, else the
// deprecated one), and the keys that name no container of the pod.
func podNRI(annotations *yaml.Node, names map[string]bool) (byName map[string]nriAnnotation, orphans []nriAnnotation) {
	byName = map[string]nriAnnotation{}
	type found struct {
		key, value string
		line       int
		notString  bool
	}
	// A value written as YAML rather than a string is read as the string
	// it should have been, for the fix.
	text := func(v *yaml.Node) string {
		if v.Kind == yaml.ScalarNode {
			return v.Value
		}
		b, err := yaml.Marshal(v)
		if err != nil {
			return ""
		}
		return string(b)
	}
	current, old := map[string]found{}, map[string]found{}
	for _, kv := range pairs(annotations) {
		k := kv[0].Value
		f := found{key: k, value: text(kv[1]), line: line(kv[0], 1), notString: kv[1].Kind != yaml.ScalarNode}
		switch {
		case strings.HasPrefix(k, nriKey):
			current[strings.TrimPrefix(k, nriKey)] = f
		case strings.HasPrefix(k, nriOldKey):
			old[strings.TrimPrefix(k, nriOldKey)] = f
		}
	}
	var all []string
	for n := range old {
		if _, ok := current[n]; !ok {
			current[n] = old[n]
		}
	}
	for n := range current {
		all = append(all, n)
	}
	sort.Strings(all)
	for _, n := range all {
		f := current[n]
		a := readNRI(f.key, n, f.line, f.value)
		if f.notString {
			// The apiserver rejects it: annotation values are strings.
			a.memlock = nil
			a.fail("its value is YAML, not a string (annotations are strings: write the list as a block scalar, `|`), so the apiserver rejects the pod")
		}
		if names[n] {
			byName[n] = a
		} else {
			orphans = append(orphans, a)
		}
	}
	return byName, orphans
}

// misplacedNRI finds ulimit-adjuster annotations on a workload's own
// metadata (a Deployment's, a Job's): the runtime sees only the pod's, so
// they apply nothing. Pods, and kinds without a pod template, have none.
func misplacedNRI(file string, doc *yaml.Node, refs []podRef) []Finding {
	kind := str(get(doc, "kind"))
	if kind == "Pod" || kind == "List" || len(refs) == 0 {
		return nil
	}
	var out []Finding
	for _, kv := range pairs(path(doc, "metadata", "annotations")) {
		k := kv[0].Value
		name, ok := strings.CutPrefix(k, nriKey)
		if !ok {
			name, ok = strings.CutPrefix(k, nriOldKey)
		}
		if !ok {
			continue
		}
		a := readNRI(k, name, line(kv[0], 1), str(kv[1]))
		out = append(out, readFinding(Finding{ID: IDNRIAnnotation, File: file, Line: a.line, Object: refs[0].object, Container: name,
			Message: fmt.Sprintf("The annotation %s is on the %s's own metadata, which the container runtime never sees (only the pod's annotations reach NRI), so the ulimit-adjuster applies nothing: it belongs in the pod template's metadata.", k, kind),
			Fix:     "# in the pod template (spec.template.metadata, or the template of each replica)\n" + a.corrected(name)}))
	}
	return out
}
