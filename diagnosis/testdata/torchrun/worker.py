import os, socket, sys
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record

WARN = os.environ.get("WORKER_WARN", "")

def fail(rank):
    # What ProcessGroupNCCL raises (torch 1.13), built at run time so that the
    # traceback's source line does not carry the text.
    msg = "\n".join([
        "NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1275, unhandled system error, NCCL version 2.14.3",
        "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error. ",
        "Last error:",
        WARN or os.environ.get("WORKER_LAST", "socketStartConnect: Connect to 10.0.0.2<45123> failed : Connection refused"),
    ])
    raise RuntimeError(msg)

@record
def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    if WARN:
        host = socket.gethostname().split(".")[0]
        print(f"{host}:{os.getpid()}:{os.getpid()+7} [{rank}] misc/socket.cc:484 NCCL WARN {WARN}", flush=True)
    dist.barrier()
    fail(rank)

if __name__ == "__main__":
    main()
