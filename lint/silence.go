package lint

import (
	"strings"

	"go.yaml.in/yaml/v3"
)

// IgnoreAnnotation is the prefix of the annotation that silences a finding
// in a Kubernetes object, as kube-linter's ignore-check.kube-linter.io/:
// `ignore-check.ncclrun.io/<id>: "reason"` on the object's metadata (every
// pod template of the object) or on a pod template's metadata (that
// template's containers).
const IgnoreAnnotation = "ignore-check.ncclrun.io/"

// IgnoreExtension is Compose's equivalent, an extension field Compose
// itself ignores: `x-ncclrun-ignore: {<id>: "reason"}` on a service (that
// service) or at the top of the file (every service).
const IgnoreExtension = "x-ncclrun-ignore"

// Silence is why a finding is not reported: the annotation (or Compose
// extension) that silenced it and the reason written there.
type Silence struct {
	By     string `json:"by"`
	Reason string `json:"reason"`
}

// silences are the findings an object silences, by id.
type silences map[string]Silence

// annotationSilences reads the ignore-check annotations of a metadata's
// annotations.
func annotationSilences(annotations *yaml.Node) silences {
	var s silences
	for _, kv := range pairs(annotations) {
		id, ok := strings.CutPrefix(kv[0].Value, IgnoreAnnotation)
		if !ok || id == "" {
			continue
		}
		if s == nil {
			s = silences{}
		}
		s[id] = Silence{By: kv[0].Value, Reason: str(kv[1])}
	}
	return s
}

// extensionSilences reads a Compose x-ncclrun-ignore mapping.
func extensionSilences(ext *yaml.Node) silences {
	var s silences
	for _, kv := range pairs(ext) {
		if s == nil {
			s = silences{}
		}
		s[kv[0].Value] = Silence{By: IgnoreExtension + "." + kv[0].Value, Reason: str(kv[1])}
	}
	return s
}

// with is s and more together, more's silence winning for an id both
// name (a pod template's over its object's, a service's over the file's).
func (s silences) with(more silences) silences {
	if len(s) == 0 {
		return more
	}
	if len(more) == 0 {
		return s
	}
	out := make(silences, len(s)+len(more))
	for id, v := range s {
		out[id] = v
	}
	for id, v := range more {
		out[id] = v
	}
	return out
}

// apply marks the findings whose id s silences.
func (s silences) apply(fs []Finding) {
	for i := range fs {
		if v, ok := s[fs[i].ID]; ok {
			fs[i].Silenced = &v
		}
	}
}
