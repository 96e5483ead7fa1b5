package launcher

import (
	"sort"
	"strings"
)

// EnvVar is one variable ncclrun may add, with the reason shown by `ncclrun env`.
type EnvVar struct {
	Name   string `json:"name"`
	Value  string `json:"value"`
	Reason string `json:"reason"`
}

// ComposeEnv returns base with each of adds appended unless base already
// sets that name (even to the empty string) or preset (NCCL's own
// configuration files) does; it returns the variables actually added, in
// the order of adds (a name repeated in adds is added once, the first
// time). Entries of base are never changed or removed. The result is
// sorted by name; entries with the same name keep their relative order, so
// a lookup that takes the first match sees what it saw in base. A nil base
// is an empty environment, not os.Environ().
func ComposeEnv(base []string, adds []EnvVar, preset map[string]string) (env []string, added []EnvVar) {
	set := make(map[string]bool, len(base)+len(adds))
	env = make([]string, 0, len(base)+len(adds))
	for _, kv := range base {
		set[envName(kv)] = true
		env = append(env, kv)
	}
	for _, a := range adds {
		if a.Name == "" || set[a.Name] {
			continue
		}
		if _, ok := preset[a.Name]; ok {
			continue
		}
		set[a.Name] = true
		env = append(env, a.Name+"="+a.Value)
		added = append(added, a)
	}
	sort.SliceStable(env, func(i, j int) bool { return envName(env[i]) < envName(env[j]) })
	return env, added
}

// envName returns the name part of a "NAME=value" entry (all of it when
// there is no '=').
func envName(kv string) string {
	if i := strings.IndexByte(kv, '='); i >= 0 {
		return kv[:i]
	}
	return kv
}

// envLookup returns the value of the first entry named name in env, the
// one glibc's getenv and Go's os.Getenv return.
func envLookup(env []string, name string) (string, bool) {
	for _, kv := range env {
		if envName(kv) == name {
			return strings.TrimPrefix(kv[len(name):], "="), true
		}
	}
	return "", false
}

// envWithout returns env without any entry named name.
func envWithout(env []string, name string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if envName(kv) != name {
			out = append(out, kv)
		}
	}
	return out
}
