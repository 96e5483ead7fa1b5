package launcher

import (
	"os"
	"path/filepath"
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
	return env, append(added[:len(added):len(added)], EnvVar{Name: OpenMPIEnvList, Value: value, Reason: reason})
}

// ForwardEnv returns the command's arguments and environment with the
// variables ncclrun added forwarded to the ranks an Open MPI mpirun starts
// on other nodes, and added with OpenMPIEnvList appended when it was set.
// Open MPI 4 aborts a job that has both -x options and OpenMPIEnvList, so
// the two are never mixed:
//   - the user's environment sets OpenMPIEnvList: the names are appended
//     to it (their mpirun cannot be passing -x) and no -x is added;
//   - the command is Open MPI's launcher: -x NAME (ArgsWithEnv);
//   - the command is a shell running a -c script that starts Open MPI's launcher
//     (a launch script, where ncclrun cannot add -x) and in which no
//     option starts with -x: OpenMPIEnvList is set;
//   - anything else (a script file ncclrun cannot read): unchanged.
func (c Command) ForwardEnv(env []string, added []EnvVar) ([]string, []string, []EnvVar) {
	if len(added) == 0 {
		return c.Args, env, added
	}
	if _, set := environ.Lookup(env, OpenMPIEnvList); set {
		env, added = WithOpenMPIEnvList(env, added)
		return c.Args, env, added
	}
	if isOpenMPI(c.Path, os.Getenv("PATH"), os.Getenv("OPAL_PREFIX") != "") {
		return c.ArgsWithEnv(added), env, added
	}
	if words, ok := shellScript(c.Path, c.Args); ok && scriptStartsOpenMPI(words) {
		env, added = WithOpenMPIEnvList(env, added)
	}
	return c.Args, env, added
}

// shells are the command names taken for a POSIX shell's -c.
var shells = map[string]bool{"sh": true, "bash": true, "dash": true, "ash": true, "ksh": true, "mksh": true, "zsh": true}

// shellScript returns the words of `SHELL [options] -c SCRIPT [ARG0 ARGS]`:
// SCRIPT's and the arguments that follow it (exec "$@" runs them).
func shellScript(path string, args []string) ([]string, bool) {
	if !shells[filepath.Base(path)] {
		return nil, false
	}
	c := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--" && c && i+1 < len(args):
			i++
			fallthrough
		case c && !strings.HasPrefix(args[i], "-"):
			words := strings.FieldsFunc(args[i], func(r rune) bool { return strings.ContainsRune(" \t\n;&|()`'\"<>", r) })
			return append(words, args[i+1:]...), true
		case a == "-o" || a == "+o":
			i++ // the option's name
		case len(a) > 1 && (a[0] == '-' || a[0] == '+') && a[1] != '-':
			c = c || strings.ContainsRune(a[1:], 'c')
		default:
			return nil, false
		}
	}
	return nil, false
}

// scriptStartsOpenMPI reports whether a shell script's words name Open
// MPI's launcher, and nothing in them could clash with OpenMPIEnvList: no
// word starting with -x or --x (whatever command it belongs to), no
// mention of Open MPI's own list or its environment file.
func scriptStartsOpenMPI(words []string) bool {
	mpi := false
	for _, w := range words {
		if strings.HasPrefix(w, "-x") || strings.HasPrefix(w, "--x") ||
			strings.Contains(w, "mca_base_env_list") || strings.Contains(w, "mca_base_envar_file_prefix") {
			return false
		}
		mpi = mpi || isOpenMPI(w, os.Getenv("PATH"), os.Getenv("OPAL_PREFIX") != "")
	}
	return mpi
}
