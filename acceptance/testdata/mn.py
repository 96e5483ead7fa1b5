# A worker of the multi-node suite (torchrun, gloo). MODE says what it does:
#   ok     one all_reduce of rank+1, then prints "rank R sum S"
#   loop   prints "ready R", then all_reduces until a peer is gone
#   raise  as loop, but rank RAISE_RANK raises once it is ready
# GLOO_TIMEOUT (seconds, default 60) bounds every collective and the
# store's wait for the other ranks.
import datetime
import os
import time

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record


@record
def main():
    timeout = datetime.timedelta(seconds=float(os.environ.get("GLOO_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    t = torch.ones(1) * (rank + 1)
    dist.all_reduce(t)
    mode = os.environ.get("MODE", "ok")
    if mode == "ok":
        print(f"rank {rank} sum {t.item():.0f}", flush=True)
        dist.destroy_process_group()
        return
    # One write(2): the ranks' lines must not interleave.
    os.write(1, f"ready {rank}\n".encode())
    if mode == "raise" and rank == int(os.environ["RAISE_RANK"]):
        raise RuntimeError(f"rank {rank} failed on purpose")
    while True:
        dist.all_reduce(t)
        time.sleep(0.05)


main()
