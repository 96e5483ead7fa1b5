package cmdkind

import (
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Size is a job's size as its launcher's own options give it: World
// ranks in all and PerNode on each node (0 where they do not say), with
// the arguments that say so.
type Size struct {
	World, PerNode       int
	WorldArg, PerNodeArg string
}

// pairs are each launcher's options that take two words: Open MPI's MCA
// parameters (--mca NAME VALUE), MPICH's and Intel MPI's variables
// (-genv NAME VALUE).
var pairs = []option{
	{"mpi", []string{"--mca", "-mca", "--gmca", "-gmca", "--prtemca", "-prtemca", "--pmixmca", "-pmixmca", "-genv", "--genv", "-env", "--env"}},
}

// switches are each launcher's options that take no value; any other
// option without "=" takes the next word, unless that begins with "-".
var switches = []option{
	{"torchrun", []string{"--standalone", "--no-python", "--no_python", "-m", "--module", "--run-path", "--run_path"}},
	{"mpi", []string{"--oversubscribe", "--allow-run-as-root", "--tag-output", "--timestamp-output", "--report-bindings", "--display-map", "--use-hwthread-cpus", "-q", "--quiet", "-v", "--verbose"}},
	{"srun", []string{"--exclusive", "-l", "--label", "-u", "--unbuffered", "--overlap"}},
}

// option is a launcher's list of options of one kind.
type option struct {
	launcher string
	names    []string
}

// optionOf reports whether name is one of launcher's options in list.
func optionOf(list []option, launcher, name string) bool {
	for _, o := range list {
		if o.launcher == launcher {
			return slices.Contains(o.names, name)
		}
	}
	return false
}

// launcherOf names the launcher a word of a command line is ("torchrun",
// "mpi", "srun"; "" for none): torchrun, torch.distributed.run or
// torch.distributed.launch (python's -m module, -mMODULE too), Open MPI's
// launchers under any suffix (mpirun.openmpi, mpiexec.hydra), srun.
func launcherOf(word string) string {
	base := filepath.Base(word)
	name, _, _ := strings.Cut(base, ".")
	switch {
	case base == "torchrun" || word == "torch.distributed.run" || word == "torch.distributed.launch",
		word == "-mtorch.distributed.run" || word == "-mtorch.distributed.launch":
		return "torchrun"
	case slices.Contains(mpiLaunchers, name):
		return "mpi"
	case base == "srun":
		return "srun"
	}
	return ""
}

// SizeOf reads the size of the job that argv starts, from the options of
// the first launcher it names (launcherOf): torchrun's --nnodes (N, or
// N:N) or --standalone times --nproc-per-node (--nproc_per_node, torch
// 1.x's spelling); MPI's -np (-n, --np, --n) and -npernode (MPICH's and
// Intel MPI's -ppn, -perhost); srun's
// -n (--ntasks) and --ntasks-per-node. Only the launcher's own options
// count: they come before the program it starts, the first word that is
// neither an option nor an option's value. A value that is not a
// positive count (torchrun's "gpu" or "auto") says nothing.
func SizeOf(argv []string) Size {
	for i, a := range argv {
		if kind := launcherOf(a); kind != "" {
			return sizeFrom(kind, argv[i+1:])
		}
	}
	return Size{}
}

func sizeFrom(kind string, opts []string) Size {
	var s Size
	nodes, nodesKnown := 0, false
	for i := 0; i < len(opts); i++ {
		a := opts[i]
		if a == "--" || !strings.HasPrefix(a, "-") {
			break // the program the launcher starts
		}
		name, val, hasVal := strings.Cut(a, "=")
		if optionOf(pairs, kind, name) {
			i += 2
			continue
		}
		if !hasVal && !optionOf(switches, kind, name) && i+1 < len(opts) && !strings.HasPrefix(opts[i+1], "-") {
			i++
			val, a = opts[i], a+" "+opts[i]
		}
		n, err := strconv.Atoi(val)
		if err != nil || n <= 0 {
			n = 0
		}
		switch kind + " " + name {
		case "torchrun --standalone":
			nodes, nodesKnown = 1, true
		case "torchrun --nnodes":
			lo, hi, ranged := strings.Cut(val, ":")
			if k, err := strconv.Atoi(lo); err == nil && k > 0 && (!ranged || hi == lo) {
				nodes, nodesKnown = k, true
			}
		case "torchrun --nproc-per-node", "torchrun --nproc_per_node", "mpi -npernode", "mpi --npernode", "mpi -ppn", "mpi -perhost", "srun --ntasks-per-node":
			s.PerNode, s.PerNodeArg = n, a
		case "mpi -np", "mpi -n", "mpi --np", "mpi --n", "srun -n", "srun --ntasks":
			s.World, s.WorldArg = n, a
		}
	}
	if s.PerNode == 0 {
		s.PerNodeArg = ""
	}
	if s.World == 0 {
		s.WorldArg = ""
	}
	if kind == "torchrun" && nodesKnown && s.PerNode > 0 {
		s.World = nodes * s.PerNode
	}
	return s
}

// Ranks is how many ranks the command starts, as its own arguments say,
// and the argument that says so: torchrun's --nproc-per-node on this node,
// an Open MPI launcher's -np in all (SizeOf). 0 when they do not say, or
// for any other command. Preflight's env-sanity check uses it: several
// ranks must not share one NCCL_DEBUG_FILE.
func (c Command) Ranks() (int, string) {
	s := SizeOf(append([]string{c.Path}, c.Args...))
	switch {
	case c.Torchrun():
		return s.PerNode, s.PerNodeArg
	case launcherOf(c.Path) == "mpi":
		return s.World, s.WorldArg
	}
	return 0, ""
}
