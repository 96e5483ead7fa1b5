package launcher

import (
	"os"
	"path/filepath"
	"strings"
)

// Command is CMD as given on ncclrun's command line: the program and its
// arguments. It is the one place that knows which launcher CMD is
// (torchrun, Open MPI's or another MPI's mpirun, a starter of ranks on
// other hosts) and what that means for ncclrun.
type Command struct {
	Path string
	Args []string
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

// remoteLaunchers start ranks on other hosts, besides the MPI launchers.
var remoteLaunchers = map[string]bool{
	"srun": true, "pdsh": true, "ssh": true, "clush": true, "deepspeed": true, "horovodrun": true,
}

// Remote reports whether the command starts ranks on other hosts (an MPI
// launcher such as mpirun or mpiexec.hydra, srun, ssh, pdsh, clush,
// deepspeed, horovodrun): they get ncclrun's environment but none of the
// files on this host.
func (c Command) Remote() bool {
	base := filepath.Base(c.Path)
	name, _, _ := strings.Cut(base, ".")
	return mpiLaunchers[name] || remoteLaunchers[base]
}

// ArgsWithEnv returns c.Args with `-x NAME` inserted, before the user's
// own arguments, for each added variable when the command is Open MPI's
// launcher (mpirun, mpiexec, orterun, prterun), which does not forward
// the environment to remote ranks. A name the user already passes with -x
// is not repeated. For any other command, MPICH's and Intel MPI's Hydra
// mpiexec included (they forward the whole environment by default),
// c.Args is returned unchanged.
//
// How Open MPI is told apart: orterun and prterun (and names such as
// mpirun.openmpi) are Open MPI's own; for mpirun and mpiexec the command is
// resolved through PATH and symlinks (Debian's alternatives), and it is Open
// MPI when the resolved name says so or when ompi_info or prte_info sits
// next to it; a resolved name or a sibling that says MPICH, Hydra or Intel
// MPI (mpichversion, hydra_pmi_proxy, impi_info) means not Open MPI. When
// nothing decides, OPAL_PREFIX in ncclrun's environment means Open MPI.
func (c Command) ArgsWithEnv(added []EnvVar) []string {
	args := c.Args
	if len(added) == 0 || !isOpenMPI(c.Path, os.Getenv("PATH"), os.Getenv("OPAL_PREFIX") != "") {
		return args
	}
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

// mpiLaunchers are the command names Open MPI installs as its launcher.
var mpiLaunchers = map[string]bool{"mpirun": true, "mpiexec": true, "orterun": true, "prterun": true}

// isOpenMPI reports whether path names Open MPI's launcher (see ArgsWithEnv).
func isOpenMPI(path, pathEnv string, opalPrefix bool) bool {
	base := filepath.Base(path)
	name, suffix, _ := strings.Cut(base, ".")
	if !mpiLaunchers[name] {
		return false
	}
	if verdict, ok := nameVerdict(name, suffix); ok {
		return verdict
	}
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
	return opalPrefix
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
