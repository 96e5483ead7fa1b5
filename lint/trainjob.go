package lint

import (
	"go.yaml.in/yaml/v3"
)

// runtimeDoc is a Kubeflow Trainer (Cluster)TrainingRuntime of the input.
type runtimeDoc struct {
	file string
	doc  *yaml.Node
}

// listed is d, or the objects of a List (depth bounds nesting).
func listed(d *yaml.Node, depth int) []*yaml.Node {
	if str(get(d, "kind")) != "List" {
		return []*yaml.Node{d}
	}
	if depth > 4 {
		return nil
	}
	var out []*yaml.Node
	for _, it := range items(get(d, "items")) {
		out = append(out, listed(it, depth+1)...)
	}
	return out
}

// trainJobTemplates is the pod template a Kubeflow Trainer TrainJob runs
// its trainer in: the trainer step of the runtime it names (spec.runtimeRef,
// kind ClusterTrainingRuntime unless given), with spec.trainer's image,
// command, args, env and resourcesPerNode put into the trainer container.
// A TrainJob whose trainer sets neither GPUs nor a command adds nothing to
// the runtime's own verdict, and one whose runtime is not in the input
// cannot be judged: both give no template.
func trainJobTemplates(file string, job *yaml.Node, runtimes map[string]runtimeDoc) []podRef {
	spec := get(job, "spec")
	tr := get(spec, "trainer")
	if tr == nil || !(gpuResources(get(tr, "resourcesPerNode")) || get(tr, "command") != nil || get(tr, "args") != nil) {
		return nil
	}
	ref := get(spec, "runtimeRef")
	kind := str(get(ref, "kind"))
	if kind == "" {
		kind = "ClusterTrainingRuntime"
	}
	rt, ok := runtimes[kind+"/"+str(get(ref, "name"))]
	if !ok {
		return nil
	}
	relabel := 0 // lines of a runtime in another file point at spec.trainer
	if rt.file != file {
		relabel = line(tr, 1)
		for _, kv := range pairs(spec) {
			if kv[0].Value == "trainer" {
				relabel = line(kv[0], relabel) // the key's line, not its value's
			}
		}
	}
	object := "TrainJob/" + str(path(job, "metadata", "name"))
	jobs := items(path(rt.doc, "spec", "template", "spec", "replicatedJobs"))
	var step *yaml.Node
	for _, rj := range jobs {
		if str(path(rj, "template", "metadata", "labels", "trainer.kubeflow.org/trainjob-ancestor-step")) == "trainer" {
			step = rj
		}
	}
	for _, rj := range jobs {
		if step == nil && str(get(rj, "name")) == "node" {
			step = rj
		}
	}
	if step == nil && len(jobs) == 1 {
		step = jobs[0]
	}
	if step == nil {
		return nil
	}
	pt := clone(path(step, "template", "spec", "template"), relabel)
	cs := items(path(pt, "spec", "containers"))
	if len(cs) == 0 {
		return nil
	}
	target := cs[0]
	for _, c := range cs {
		if str(get(c, "name")) == "node" {
			target = c
		}
	}
	for _, k := range []string{"image", "command", "args"} {
		if v := get(tr, k); v != nil {
			set(target, k, v)
		}
	}
	if v := get(tr, "resourcesPerNode"); v != nil {
		set(target, "resources", v)
	}
	if env := items(get(tr, "env")); len(env) > 0 {
		merged := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		names := map[string]bool{}
		for _, e := range env {
			names[str(get(e, "name"))] = true
		}
		for _, e := range items(get(target, "env")) {
			if !names[str(get(e, "name"))] {
				merged.Content = append(merged.Content, e)
			}
		}
		merged.Content = append(merged.Content, env...)
		set(target, "env", merged)
	}
	return template(object, pt)
}

// clone copies n deeply, aliases resolved, up to cloneBudget nodes (an
// alias bomb would otherwise expand without end); a positive line replaces
// every line in the copy.
func clone(n *yaml.Node, ln int) *yaml.Node {
	budget := cloneBudget
	return cloneN(n, ln, &budget)
}

const cloneBudget = 100000

func cloneN(n *yaml.Node, ln int, budget *int) *yaml.Node {
	n = deref(n)
	*budget--
	if n == nil || *budget < 0 {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Line: ln}
	}
	c := *n
	c.Content = nil
	if ln > 0 {
		c.Line = ln
	}
	for _, ch := range n.Content {
		c.Content = append(c.Content, cloneN(ch, ln, budget))
	}
	return &c
}

// set puts key: v into mapping m, replacing a value that is there.
func set(m *yaml.Node, key string, v *yaml.Node) {
	if m == nil || m.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content[i+1] = v
			return
		}
	}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key, Line: v.Line}, v)
}
