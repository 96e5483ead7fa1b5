package preflight

import (
	"context"
	"slices"
	"strings"

	"github.com/ncclrun/ncclrun/internal/environ"
)

// EnvFile is the file at the top of a tree that holds the environment it
// was taken in, one KEY=VALUE a line (written by `ncclrun snapshot`). Under
// a tree root Run reads it instead of Options.Env; a tree without it may
// have proc/self/environ (NUL-separated, as the kernel shows it), which is
// read then.
const EnvFile = "ncclrun-env"

// ReadKind says how a reader used a path (Read.Kind).
type ReadKind int

// The ways preflight's readers use a path under a tree root.
const (
	ReadFile   ReadKind = iota + 1 // read to the end (bounded)
	ReadAttr                       // one bounded read of a sysfs or procfs attribute
	ReadConf                       // an NCCL configuration file (read to the end)
	ReadDir                        // listed (Names, Dirs)
	ReadExists                     // only whether it exists (Dirs[0]: a directory)
)

// Read is one access of the tree-mode readers (Record). The zero value
// means nothing.
type Read struct {
	Rel  string // slash separated, relative to the root
	Kind ReadKind
	// Data is the content the reader got (ReadFile, ReadAttr, ReadConf).
	Data []byte
	// Names are the entries a ReadDir kept (sorted) and Dirs whether each
	// is a directory; for ReadExists, Dirs[0] says whether the path is one.
	Names []string
	Dirs  []bool
	// Err is why the path could not be used; it wraps fs.ErrNotExist when
	// the path is not there.
	Err error
}

// Record runs the checks as Run does under a tree root, but reading
// opts.Root as a tree even when it is "/" (the live system's files, not its
// system calls), and calls rec with every read, in the order made. The
// environment is opts.Env (a tree's recorded one is not read), and --user
// is resolved as for USER:GROUP names, so the passwd and group files that
// --user reads are read too. It is what `ncclrun snapshot` copies by: the
// list of what is copied is the list of what is read.
func Record(ctx context.Context, opts Options, rec func(Read)) Report {
	root := opts.Root
	if root == "" {
		root = "/"
	}
	s := newTree(root)
	s.t.rec = rec
	opts.Plan = Plan{User: "root:root"}
	if opts.Env == nil {
		opts.Env = []string{}
	}
	return run(ctx, s, opts, false)
}

// treeEnv is the environment a tree recorded: EnvFile, else
// proc/self/environ; false when it has neither.
func treeEnv(s sysRoot) ([]string, bool) {
	if b, err := s.readFile(EnvFile); err == nil {
		var env []string
		for _, kv := range environ.Parse(b, '\n') {
			if k, _, ok := strings.Cut(kv, "="); ok && k != "" {
				env = append(env, kv)
			}
		}
		return env, true
	}
	if b, err := s.readFile("proc/self/environ"); err == nil {
		return environ.Parse(b, 0), true
	}
	return nil, false
}

// envRecorded are the variables preflight reads besides the NCCL_ and
// NCCLRUN_ prefixes (environment.go, network.go, rdma.go, config.go).
var envRecorded = []string{
	"HOME", // where ~/.nccl.conf is looked up
	"KUBERNETES_SERVICE_HOST",
	"KUBERNETES_SERVICE_PORT",
	"KUBERNETES_PORT",
	"HOSTNAME", // a pod's name is a platform clue
	"container",
	"SLURM_JOB_ID",
	"SLURM_PROCID",
	"SLURM_JOB_NUM_NODES",
	"SLURM_NNODES",
	"PET_NNODES",
	"NNODES",
	"OMPI_MCA_orte_num_nodes",
	"WORLD_SIZE",
	"LOCAL_WORLD_SIZE",
	"MASTER_ADDR",
	"GLOO_SOCKET_IFNAME",
	"LD_LIBRARY_PATH", // where libnccl.so is looked for (sanity.go)
	"SLURM_NTASKS",
	"OMPI_COMM_WORLD_SIZE",
	"PMI_SIZE",
}

// EnvUsed reports whether Run may read variable name: the names it looks
// up, NCCL_* and NCCLRUN_* (a snapshot records these and no other).
func EnvUsed(name string) bool {
	return slices.Contains(envRecorded, name) || strings.HasPrefix(name, "NCCL_") || strings.HasPrefix(name, "NCCLRUN_")
}
