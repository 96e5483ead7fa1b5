package launcher

import "errors"

// ErrNotImplemented is returned while the launcher is being written.
var ErrNotImplemented = errors.New("not implemented yet")

// Run starts the child described by cfg, supervises it and returns how it
// ended. (Stub.)
func Run(cfg Config) (Result, error) { return Result{}, ErrNotImplemented }

// Exec replaces ncclrun with the child (--no-watch). It returns only on
// failure. (Stub.)
func Exec(cfg Config) error { return ErrNotImplemented }

// RaiseMemlock raises ncclrun's own RLIMIT_MEMLOCK: soft to hard, and hard
// to unlimited where CAP_SYS_RESOURCE allows. Children inherit it. (Stub.)
func RaiseMemlock() (MemlockChange, error) { return MemlockChange{}, ErrNotImplemented }

// ComposeEnv returns base with each of adds set unless base already sets it
// or preset (NCCL's config files) does; it returns the variables actually
// added. The result is sorted. (Stub.)
func ComposeEnv(base []string, adds []EnvVar, preset map[string]string) (env []string, added []EnvVar) {
	return base, nil
}

// EnvVar is one variable ncclrun may add, with the reason shown by `ncclrun env`.
type EnvVar struct {
	Name   string `json:"name"`
	Value  string `json:"value"`
	Reason string `json:"reason"`
}

// MPIRunArgs returns args with `-x NAME` inserted for each added variable
// when path is OpenMPI's mpirun/mpiexec, which does not forward the
// environment to remote ranks; otherwise args unchanged. (Stub.)
func MPIRunArgs(path string, args []string, added []EnvVar) []string { return args }
