// Package cmdkind knows what kind of command CMD is: the program and
// arguments as given on ncclrun's command line, with the environment CMD
// itself will run in. It is the one place that knows torchrun, Open MPI's
// launcher and the starters of ranks on other hosts, and what each means
// for ncclrun: which variables must be forwarded to remote ranks and how
// (-x NAME, or Open MPI's environment list), whether the ranks are all on
// this host, and which processes save a checkpoint when told.
//
// It reads only the names in Command and the files its PATH resolves; it
// starts nothing.
package cmdkind

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ncclrun/ncclrun/internal/environ"
)

// Command is CMD as given: the program, its arguments, and the environment
// CMD will get (its PATH and OPAL_PREFIX decide which MPI a bare mpirun
// is, never ncclrun's own).
type Command struct {
	Path string
	Args []string
	Env  []string
}

// Torchrun reports whether the command is torchrun, or python running
// torch.distributed.run or torch.distributed.launch as a module.
func (c Command) Torchrun() bool {
	base := filepath.Base(c.Path)
	if base == "torchrun" {
		return true
	}
	if !strings.HasPrefix(base, "python") {
		return false
	}
	for i, a := range c.Args {
		switch {
		case a == "-m" && i+1 < len(c.Args):
			m := c.Args[i+1]
			return m == "torch.distributed.run" || m == "torch.distributed.launch"
		case a == "-mtorch.distributed.run", a == "-mtorch.distributed.launch":
			return true
		case !strings.HasPrefix(a, "-"):
			return false // a script: not the torch launcher
		}
	}
	return false
}

// CheckpointChildren reports whether the processes that save a checkpoint
// on a signal are the command's own children rather than the command: so
// for torchrun, whose agent does not handle SIGUSR1 or SIGUSR2 and would
// die of them, while its workers train. Open MPI's mpirun forwards SIGUSR1
// and SIGUSR2 to its ranks, and any other command is taken to train
// itself: both are signalled themselves.
func (c Command) CheckpointChildren() bool { return c.Torchrun() }

// remoteLaunchers start ranks on other hosts, besides the MPI launchers.
var remoteLaunchers = []string{"srun", "pdsh", "ssh", "clush", "deepspeed", "horovodrun"}

// mpiLaunchers are the command names Open MPI installs as its launcher.
var mpiLaunchers = []string{"mpirun", "mpiexec", "orterun", "prterun"}

// remoteName reports whether the program name p (a path or a bare name)
// starts ranks on other hosts.
func remoteName(p string) bool {
	base := filepath.Base(p)
	name, _, _ := strings.Cut(base, ".")
	return slices.Contains(mpiLaunchers, name) || slices.Contains(remoteLaunchers, base)
}

// Remote returns the name of the launcher through which the command starts
// ranks on other hosts ("" for none): the command itself (an MPI launcher
// such as mpirun or mpiexec.hydra, srun, ssh, pdsh, clush, deepspeed,
// horovodrun), or one that a shell's -c script names
// (`bash -c 'mpirun --host a,b ...'`). Such ranks get the variables
// ncclrun adds but none of the files on this host.
func (c Command) Remote() string {
	if remoteName(c.Path) {
		return filepath.Base(c.Path)
	}
	words, _ := shellScript(c.Path, c.Args)
	for _, w := range words {
		if remoteName(w) {
			return filepath.Base(w)
		}
	}
	return ""
}

// OpenMPI reports whether the command is Open MPI's launcher (mpirun,
// mpiexec, orterun, prterun), which does not forward the environment to
// remote ranks.
//
// How Open MPI is told apart: orterun and prterun (and names such as
// mpirun.openmpi) are Open MPI's own; for mpirun and mpiexec the command is
// resolved through the command's PATH and symlinks (Debian's
// alternatives), and it is Open MPI when the resolved name says so or when
// ompi_info or prte_info sits next to it; a resolved name or a sibling
// that says MPICH, Hydra or Intel MPI (mpichversion, hydra_pmi_proxy,
// impi_info) means not Open MPI. When nothing decides, OPAL_PREFIX in the
// command's environment means Open MPI.
func (c Command) OpenMPI() bool { return c.openMPI(c.Path) }

func (c Command) openMPI(path string) bool {
	base := filepath.Base(path)
	name, suffix, _ := strings.Cut(base, ".")
	if !slices.Contains(mpiLaunchers, name) {
		return false
	}
	if verdict, ok := nameVerdict(name, suffix); ok {
		return verdict
	}
	pathEnv, _ := environ.Lookup(c.Env, "PATH")
	resolved := resolveCommand(path, pathEnv)
	if resolved != "" {
		if real, err := filepath.EvalSymlinks(resolved); err == nil {
			resolved = real
		}
		rname, rsuffix, _ := strings.Cut(filepath.Base(resolved), ".")
		if verdict, ok := nameVerdict(rname, rsuffix); ok {
			return verdict
		}
		dir := filepath.Dir(resolved)
		for _, sib := range []string{"ompi_info", "prte_info"} {
			if exists(filepath.Join(dir, sib)) {
				return true
			}
		}
		for _, sib := range []string{"mpichversion", "hydra_pmi_proxy", "impi_info", "mpiexec.hydra"} {
			if exists(filepath.Join(dir, sib)) {
				return false
			}
		}
	}
	opal, _ := environ.Lookup(c.Env, "OPAL_PREFIX")
	return opal != ""
}

// nameVerdict decides from a launcher's own name and suffix alone
// ("orterun", "mpirun.openmpi", "mpiexec.hydra", "mpirun.mpich").
func nameVerdict(name, suffix string) (openMPI, decided bool) {
	switch {
	case name == "orterun" || name == "prterun":
		return true, true
	case strings.Contains(suffix, "openmpi"):
		return true, true
	case strings.Contains(suffix, "mpich") || strings.Contains(suffix, "hydra") || strings.Contains(suffix, "impi"):
		return false, true
	}
	return false, false
}

// resolveCommand finds path the way a shell would (PATH lookup when it has
// no slash) and returns "" when it is not there.
func resolveCommand(path, pathEnv string) string {
	if strings.Contains(path, "/") {
		if exists(path) {
			return path
		}
		return ""
	}
	for _, dir := range filepath.SplitList(pathEnv) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, path)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// shells are the command names taken for a POSIX shell's -c.
var shells = []string{"sh", "bash", "dash", "ash", "ksh", "mksh", "zsh"}

// shellScript returns the words of `SHELL [options] -c SCRIPT [ARG0 ARGS]`:
// SCRIPT's and the arguments that follow it (exec "$@" runs them).
func shellScript(path string, args []string) ([]string, bool) {
	if !slices.Contains(shells, filepath.Base(path)) {
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
