package launcher

import (
	"sort"
	"strings"

	"github.com/ncclrun/ncclrun/internal/environ"
)

// OpenMPIEnvList is the variable through which Open MPI's mpirun forwards
// environment variables to every rank, remote ones included: a list of
// names (the value is mpirun's own) or NAME=value entries, separated by
// ';' unless OpenMPIEnvListDelimiter names another single character. It
// reaches an mpirun that a script starts, where ncclrun cannot add -x.
const (
	OpenMPIEnvList          = "OMPI_MCA_mca_base_env_list"
	OpenMPIEnvListDelimiter = "OMPI_MCA_mca_base_env_list_delimiter"
)

// WithOpenMPIEnvList returns env with the names of added appended to
// OpenMPIEnvList, and added with that variable appended to it (its value
// the whole list, its reason saying why). A user's list is kept and
// extended, never replaced, in the user's delimiter; a name it already
// lists (alone or as NAME=value) is not repeated. Nothing changes when
// added is empty, when every name is listed already, or when the user's
// delimiter is not one character (Open MPI then refuses the list itself).
// The result keeps env sorted by name (ComposeEnv's order).
func WithOpenMPIEnvList(env []string, added []EnvVar) ([]string, []EnvVar) {
	if len(added) == 0 {
		return env, added
	}
	sep := ";"
	if d, ok := environ.Lookup(env, OpenMPIEnvListDelimiter); ok && d != "" {
		if len(d) != 1 {
			return env, added
		}
		sep = d
	}
	user, set := environ.Lookup(env, OpenMPIEnvList)
	listed := map[string]bool{}
	var items []string
	if user != "" {
		for _, it := range strings.Split(user, sep) {
			name, _, _ := strings.Cut(it, "=")
			listed[name] = true
		}
		items = append(items, user)
	}
	n := len(items)
	for _, a := range added {
		if !listed[a.Name] && a.Name != OpenMPIEnvList {
			listed[a.Name] = true
			items = append(items, a.Name)
		}
	}
	if len(items) == n {
		return env, added
	}
	value := strings.Join(items, sep)
	reason := "Open MPI's mpirun forwards the variables named there to remote ranks, also when a script starts it (ncclrun adds -x only to an mpirun it starts itself)"
	if set {
		reason = "the user's list, extended: " + reason
	}
	env = append(environ.Without(env, OpenMPIEnvList), OpenMPIEnvList+"="+value)
	sort.SliceStable(env, func(i, j int) bool { return environ.Name(env[i]) < environ.Name(env[j]) })
	return env, append(added[:len(added):len(added)], EnvVar{Name: OpenMPIEnvList, Value: value, Reason: reason})
}
