package launcher

// Checkpoint names the processes that get Config.CheckpointSignal: the
// training processes, which save their state when told and before the
// terminating signal reaches the job.
type Checkpoint int

const (
	// CheckpointChild signals the main child: a CMD that trains itself, or
	// Open MPI's mpirun, which forwards SIGUSR1 and SIGUSR2 to its ranks.
	CheckpointChild Checkpoint = iota
	// CheckpointWorkers signals the main child's own children: torchrun's
	// workers. torchrun's agent (the main child) does not handle SIGUSR1
	// or SIGUSR2 and would die of them.
	CheckpointWorkers
)
