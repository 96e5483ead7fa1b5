package diagnosis

import "github.com/ncclrun/ncclrun/internal/cmdkind"

// WorldFromCommand is the job's number of ranks, and the ranks each node
// runs, as a launcher's command line fixes them (0 where it does not):
// cmdkind.SizeOf, which reads torchrun's, Open MPI's and srun's options.
// A wrapper in front (ncclrun, env, a shell's exec) is skipped: the first
// launcher word decides.
func WorldFromCommand(argv []string) (world, perNode int) {
	s := cmdkind.SizeOf(argv)
	return s.World, s.PerNode
}
