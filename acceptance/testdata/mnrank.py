# A rank of the multi-node suite under mpirun (mpi4py): prints its rank,
# host and NCCL_DEBUG as it got them. MODE=gloo: instead, joins a gloo
# process group of all ranks (MASTER_ADDR/MASTER_PORT from mpirun's -x),
# rank 1 with GLOO_SOCKET_IFNAME naming an interface its host lacks.
import os
import socket

from mpi4py import MPI

c = MPI.COMM_WORLD
rank, size = c.Get_rank(), c.Get_size()
if os.environ.get("MODE") == "gloo":
    import datetime

    import torch.distributed as dist

    if rank == 1:
        os.environ["GLOO_SOCKET_IFNAME"] = "eth9"
    dist.init_process_group("gloo", rank=rank, world_size=size, timeout=datetime.timedelta(seconds=15))
    dist.barrier()
else:
    c.Barrier()
    host = socket.gethostname()
    print(f"rank={rank} size={size} host={host} NCCL_DEBUG={os.environ.get('NCCL_DEBUG', 'unset')}", flush=True)
