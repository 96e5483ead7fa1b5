package diagnosis

import (
	"path/filepath"
	"strconv"
	"strings"
)

// WorldFromCommand is the job's number of ranks, and the ranks each node
// runs, as a launcher's command line fixes them (0 where it does not):
// torchrun's (or python -m torch.distributed.run's) --nnodes N (or N:N)
// and --nproc_per_node M, --standalone; mpirun's -np/-n; srun's
// -n/--ntasks and --ntasks-per-node. A wrapper in front (ncclrun, env,
// a shell's exec) is skipped: the first launcher word decides.
func WorldFromCommand(argv []string) (world, perNode int) {
	for i, a := range argv {
		base := filepath.Base(a)
		switch {
		case base == "torchrun" || a == "torch.distributed.run" || a == "torch.distributed.launch":
			return torchrunWorld(argv[i+1:])
		case base == "mpirun" || base == "mpiexec" || base == "srun":
			return launcherWorld(base, argv[i+1:])
		}
	}
	return 0, 0
}

// flagValue reads "--name V" or "--name=V" at argv[i]; ok says it was
// that flag (any of names).
func flagValue(argv []string, i int, names ...string) (string, int, bool) {
	a := argv[i]
	for _, n := range names {
		if a == n && i+1 < len(argv) {
			return argv[i+1], i + 1, true
		}
		if strings.HasPrefix(a, n+"=") {
			return a[len(n)+1:], i, true
		}
	}
	return "", i, false
}

func torchrunWorld(argv []string) (int, int) {
	nodes, per := 0, 0
	for i := 0; i < len(argv); i++ {
		a := argv[i]
		if !strings.HasPrefix(a, "-") {
			break // the script: its own arguments follow
		}
		if a == "--standalone" {
			nodes = 1
			continue
		}
		if v, j, ok := flagValue(argv, i, "--nnodes"); ok {
			i = j
			lo, hi, found := strings.Cut(v, ":")
			if n, err := strconv.Atoi(lo); err == nil && (!found || hi == lo) {
				nodes = n
			}
			continue
		}
		if v, j, ok := flagValue(argv, i, "--nproc_per_node", "--nproc-per-node"); ok {
			i = j
			if n, err := strconv.Atoi(v); err == nil {
				per = n
			}
			continue
		}
		if !strings.Contains(a, "=") && i+1 < len(argv) && !strings.HasPrefix(argv[i+1], "-") && a != "--no_python" && a != "--no-python" && a != "-m" && a != "--module" && a != "--run_path" && a != "--run-path" {
			i++ // a flag's value
		}
	}
	if nodes > 0 && per > 0 {
		return nodes * per, per
	}
	return 0, per
}

func launcherWorld(name string, argv []string) (int, int) {
	world, per := 0, 0
	for i := 0; i < len(argv); i++ {
		var v string
		var ok bool
		switch name {
		case "srun":
			if v, i, ok = flagValue(argv, i, "-n", "--ntasks"); ok {
				world, _ = strconv.Atoi(v)
			} else if v, i, ok = flagValue(argv, i, "--ntasks-per-node"); ok {
				per, _ = strconv.Atoi(v)
			}
		default:
			if v, i, ok = flagValue(argv, i, "-np", "-n", "--np"); ok {
				world, _ = strconv.Atoi(v)
			} else if v, i, ok = flagValue(argv, i, "-npernode", "--npernode"); ok {
				per, _ = strconv.Atoi(v)
			}
		}
	}
	return max(world, 0), max(per, 0)
}
