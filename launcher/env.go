package launcher

import (
	"sort"

	"github.com/ncclrun/ncclrun/internal/environ"
)

// EnvVar is one variable ncclrun may add, with the reason shown by `ncclrun env`.
type EnvVar = environ.Var

// ComposeEnv returns base with each of adds appended unless base already
// sets that name (even to the empty string) or preset (NCCL's own
// configuration files) does; it returns the variables actually added, in
// the order of adds (a name repeated in adds is added once, the first
// time). Entries of base are never changed or removed. The result is
// sorted by name; entries with the same name keep their relative order, so
// the last of them still wins (internal/environ's rule; the launcher hands
// the child one entry per name). A nil base is an empty environment, not
// os.Environ().
func ComposeEnv(base []string, adds []EnvVar, preset map[string]string) (env []string, added []EnvVar) {
	set := make(map[string]bool, len(base)+len(adds))
	env = make([]string, 0, len(base)+len(adds))
	for _, kv := range base {
		set[environ.Name(kv)] = true
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
	sort.SliceStable(env, func(i, j int) bool { return environ.Name(env[i]) < environ.Name(env[j]) })
	return env, added
}
