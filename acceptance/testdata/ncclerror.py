# Both ranks raise the RuntimeError ProcessGroupNCCL raises for an
# unhandled system error (torch 1.13's text, built at run time so that the
# traceback's source line does not carry it), under @record: torchrun's
# failure summary then reprints each rank's traceback after the rank
# printed it, and the two ranks' writes may interleave.
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record


@record
def main():
    dist.init_process_group("gloo")
    dist.barrier()
    raise RuntimeError("\n".join([
        "NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1275, unhandled system error, NCCL version 2.14.3",
        "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error. ",
        "Last error:",
        "socketStartConnect: Connect to 10.0.0.2<45123> failed : Connection refused",
    ]))


main()
