# A worker of the multi-node suite (torchrun, gloo). MODE says what it does:
#   ok     one all_reduce of rank+1, then prints "rank R sum S"
#   loop   prints "ready R", then all_reduces until a peer is gone
#   raise  as loop, but rank RAISE_RANK raises once it is ready
#   stall  as loop, but rank STALL_RANK stops before the next collective
#          (prints "stalling R" and sleeps), so the others' one times out
# INIT_TIMEOUT (seconds, default 60) bounds the wait for the other ranks
# to join; GLOO_TIMEOUT (seconds, default 60) every collective of the loop.
import datetime
import os
import time

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record


@record
def main():
    def seconds(name):
        return datetime.timedelta(seconds=float(os.environ.get(name, "60")))

    dist.init_process_group("gloo", timeout=seconds("INIT_TIMEOUT"))
    rank = dist.get_rank()
    group = dist.new_group(timeout=seconds("GLOO_TIMEOUT"))
    t = torch.ones(1) * (rank + 1)
    dist.all_reduce(t, group=group)
    mode = os.environ.get("MODE", "ok")
    if mode == "ok":
        print(f"rank {rank} sum {t.item():.0f}", flush=True)
        dist.destroy_process_group()
        return
    # One write(2): the ranks' lines must not interleave.
    os.write(1, f"ready {rank}\n".encode())
    if mode == "raise" and rank == int(os.environ["RAISE_RANK"]):
        raise RuntimeError(f"rank {rank} failed on purpose")
    if mode == "stall" and rank == int(os.environ["STALL_RANK"]):
        os.write(1, f"stalling {rank}\n".encode())
        time.sleep(3600)
    while True:
        dist.all_reduce(t, group=group)
        time.sleep(0.05)


main()
