import os
from mpi4py import MPI
c = MPI.COMM_WORLD
c.Barrier()
print(f"rank={c.Get_rank()} size={c.Get_size()} NCCL_DEBUG={os.environ.get('NCCL_DEBUG', 'unset')}", flush=True)
