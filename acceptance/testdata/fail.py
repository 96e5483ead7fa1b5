# A failing job. Rank 1 raises (RECORD=1: under torch's @record, which
# writes the exception to the error file torchrun reads back). FAKE_NCCL=1:
# every rank first prints NCCL's own failure lines, then raises.
import os
import socket

import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    if os.environ.get("FAKE_NCCL"):
        host, pid = socket.gethostname().split(".")[0], os.getpid()
        print(f"{host}:{pid}:{pid} [{rank}] NCCL INFO NET/IB : No device found.", flush=True)
        print(f"{host}:{pid}:{pid} [{rank}] NCCL WARN Call to ibv_reg_mr failed with error Cannot allocate memory", flush=True)
    dist.barrier()
    if rank == 1 or os.environ.get("FAKE_NCCL"):
        raise RuntimeError(f"rank {rank} failed on purpose")


if os.environ.get("RECORD"):
    main = record(main)
main()
