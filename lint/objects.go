package lint

import (
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// podRef is one pod template found in an object.
type podRef struct {
	object string     // "Kind/name"
	spec   *yaml.Node // the PodSpec
	meta   *yaml.Node // the pod template's metadata (annotations), may be nil
}

// template returns the podRef of a PodTemplateSpec node.
func template(object string, t *yaml.Node) []podRef {
	spec := get(t, "spec")
	if spec == nil {
		return nil
	}
	return []podRef{{object: object, spec: spec, meta: get(t, "metadata")}}
}

func jobTemplate(object string, jt *yaml.Node) []podRef {
	return template(object, path(jt, "spec", "template"))
}

func rayCluster(object string, rc *yaml.Node) []podRef {
	out := template(object, path(rc, "headGroupSpec", "template"))
	for _, g := range items(get(rc, "workerGroupSpecs")) {
		out = append(out, template(object, get(g, "template"))...)
	}
	return out
}

func replicatedJobs(object string, spec *yaml.Node) []podRef {
	var out []podRef
	for _, rj := range items(get(spec, "replicatedJobs")) {
		out = append(out, jobTemplate(object, get(rj, "template"))...)
	}
	return out
}

// podTemplates finds the pod templates of one Kubernetes object; depth
// bounds List nesting.
func podTemplates(doc *yaml.Node, depth int) []podRef {
	kind := str(get(doc, "kind"))
	name := str(path(doc, "metadata", "name"))
	if name == "" {
		name = str(path(doc, "metadata", "generateName"))
	}
	object := kind + "/" + name
	spec := get(doc, "spec")
	api := str(get(doc, "apiVersion"))
	switch kind {
	case "Pod":
		if spec == nil {
			return nil
		}
		return []podRef{{object: object, spec: spec, meta: get(doc, "metadata")}}
	case "PodTemplate":
		return template(object, get(doc, "template"))
	case "Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "ReplicationController":
		return template(object, get(spec, "template"))
	case "Job":
		if strings.HasPrefix(api, "batch.volcano.sh/") {
			var out []podRef
			for _, t := range items(get(spec, "tasks")) {
				out = append(out, template(object, get(t, "template"))...)
			}
			return out
		}
		return template(object, get(spec, "template"))
	case "CronJob":
		return jobTemplate(object, get(spec, "jobTemplate"))
	case "JobSet":
		return replicatedJobs(object, spec)
	case "TrainingRuntime", "ClusterTrainingRuntime":
		return replicatedJobs(object, path(spec, "template", "spec"))
	case "LeaderWorkerSet":
		lwt := get(spec, "leaderWorkerTemplate")
		return append(template(object, get(lwt, "leaderTemplate")), template(object, get(lwt, "workerTemplate"))...)
	case "RayCluster":
		return rayCluster(object, spec)
	case "RayJob":
		return rayCluster(object, get(spec, "rayClusterSpec"))
	case "RayService":
		return rayCluster(object, get(spec, "rayClusterConfig"))
	case "List":
		if depth > 4 {
			return nil
		}
		var out []podRef
		for _, it := range items(get(doc, "items")) {
			out = append(out, podTemplates(it, depth+1)...)
		}
		return out
	}
	// kubeflow training operator jobs: spec.<x>ReplicaSpecs.<role>.template,
	// roles in a stable order (Master/Launcher before Worker).
	var out []podRef
	for _, kv := range pairs(spec) {
		if !strings.HasSuffix(kv[0].Value, "ReplicaSpecs") || !strings.HasSuffix(kind, "Job") {
			continue
		}
		roles := pairs(kv[1])
		sort.SliceStable(roles, func(i, j int) bool { return roles[i][0].Line < roles[j][0].Line })
		for _, r := range roles {
			out = append(out, template(object, get(r[1], "template"))...)
		}
	}
	return out
}

// isCompose reports whether a document is a Compose file: a top-level
// services mapping and no Kubernetes kind.
func isCompose(doc *yaml.Node) bool {
	s := get(doc, "services")
	return get(doc, "kind") == nil && s != nil && s.Kind == yaml.MappingNode
}
