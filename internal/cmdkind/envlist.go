package cmdkind

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

// ForwardEnv returns the command's arguments and environment (c.Env, the
// environment CMD gets, added already in it) with the variables ncclrun
// added forwarded to the ranks an Open MPI mpirun starts on other nodes,
// and added with OpenMPIEnvList appended when it was set. Open MPI 4
// aborts a job that has both -x options and OpenMPIEnvList, so the two are
// never mixed:
//   - the environment sets OpenMPIEnvList: the names are appended to it
//     (the user's mpirun cannot be passing -x) and no -x is added;
//   - the command is Open MPI's launcher (OpenMPI): -x NAME before the
//     user's own arguments, for each name the user does not already pass
//     with -x;
//   - the command is a shell running a -c script that starts Open MPI's
//     launcher (a launch script, where ncclrun cannot add -x) and in which
//     no option starts with -x: OpenMPIEnvList is set;
//   - anything else (a script file ncclrun cannot read, MPICH's and Intel
//     MPI's Hydra, which forward the whole environment): unchanged.
func (c Command) ForwardEnv(added []environ.Var) ([]string, []string, []environ.Var) {
	env := c.Env
	if len(added) == 0 {
		return c.Args, env, added
	}
	if _, set := environ.Lookup(env, OpenMPIEnvList); set {
		env, added = withOpenMPIEnvList(env, added)
		return c.Args, env, added
	}
	if c.OpenMPI() {
		return argsWithX(c.Args, added), env, added
	}
	if words, ok := shellScript(c.Path, c.Args); ok && c.scriptStartsOpenMPI(words) {
		env, added = withOpenMPIEnvList(env, added)
	}
	return c.Args, env, added
}

// argsWithX returns args with `-x NAME` inserted before them for each
// added variable args does not already pass with -x.
func argsWithX(args []string, added []environ.Var) []string {
	passed := passedWithX(args)
	var xs []string
	for _, a := range added {
		if passed[a.Name] {
			continue
		}
		passed[a.Name] = true
		xs = append(xs, "-x", a.Name)
	}
	if len(xs) == 0 {
		return args
	}
	return append(xs, args...)
}

// passedWithX returns the names the user already forwards with -x NAME,
// -x NAME=value or -xNAME.
func passedWithX(args []string) map[string]bool {
	m := map[string]bool{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		var v string
		switch {
		case a == "-x" || a == "--x":
			if i+1 < len(args) {
				v = args[i+1]
				i++
			}
		case strings.HasPrefix(a, "-x") && len(a) > 2 && a[2] != '-':
			v = a[2:]
		default:
			continue
		}
		name, _, _ := strings.Cut(v, "=")
		m[name] = true
	}
	return m
}

// withOpenMPIEnvList returns env with the names of added appended to
// OpenMPIEnvList, and added with that variable appended to it (its value
// the whole list, its reason saying why). A user's list is kept and
// extended, never replaced, in the user's delimiter; a name it already
// lists (alone or as NAME=value) is not repeated. Nothing changes when
// added is empty, when every name is listed already, or when the user's
// delimiter is not one character (Open MPI then refuses the list itself).
// The result keeps env sorted by name (the launcher's ComposeEnv order).
func withOpenMPIEnvList(env []string, added []environ.Var) ([]string, []environ.Var) {
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
	if user = strings.TrimSuffix(user, sep); user != "" {
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
	return env, append(added[:len(added):len(added)], environ.Var{Name: OpenMPIEnvList, Value: value, Reason: reason})
}

// scriptStartsOpenMPI reports whether a shell script's words name Open
// MPI's launcher, and nothing in them could clash with OpenMPIEnvList: no
// word starting with -x or --x (whatever command it belongs to), no
// mention of Open MPI's own list or its environment file.
func (c Command) scriptStartsOpenMPI(words []string) bool {
	mpi := false
	for _, w := range words {
		if strings.HasPrefix(w, "-x") || strings.HasPrefix(w, "--x") ||
			strings.Contains(w, "mca_base_env_list") || strings.Contains(w, "mca_base_envar_file_prefix") {
			return false
		}
		mpi = mpi || c.openMPI(w)
	}
	return mpi
}
