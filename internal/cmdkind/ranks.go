package cmdkind

import (
	"path/filepath"
	"strconv"
	"strings"
)

// Ranks is how many ranks the command starts as its own arguments say, and the
// argument that says so: torchrun's --nproc-per-node (or
// --nproc_per_node, torch 1.x's spelling) on this node, mpirun's or
// mpiexec's -np / -n / --np in all. 0 when they do not say (another
// command, no such flag, torchrun's "gpu" or "auto"). Preflight's
// env-sanity check uses it: several ranks must not share one
// NCCL_DEBUG_FILE.
//
// Only the launcher's own options are read: they come before the program
// it starts, the first word that is neither an option nor the value of
// one (an option without "=" is taken to take the next word).
func (c Command) Ranks() (int, string) {
	var names []string
	base, _, _ := strings.Cut(filepath.Base(c.Path), ".")
	switch {
	case c.Torchrun():
		names = []string{"--nproc-per-node", "--nproc_per_node"}
	case mpiLaunchers[base]:
		names = []string{"-np", "--np", "-n", "--n"}
	default:
		return 0, ""
	}
	valueNext := false
	for i, a := range c.Args {
		if a == "--" {
			break
		}
		if !strings.HasPrefix(a, "-") {
			if !valueNext {
				break // the program the launcher starts
			}
			valueNext = false
			continue
		}
		name, val, hasVal := strings.Cut(a, "=")
		valueNext = !hasVal
		for _, n := range names {
			if name != n {
				continue
			}
			if !hasVal {
				if i+1 >= len(c.Args) {
					return 0, ""
				}
				val, a = c.Args[i+1], a+" "+c.Args[i+1]
			}
			if k, err := strconv.Atoi(val); err == nil && k > 0 {
				return k, a
			}
			return 0, ""
		}
	}
	return 0, ""
}
