# A healthy 2-rank gloo job: an all_reduce of rank+1 on every rank.
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
t = torch.ones(1) * (dist.get_rank() + 1)
dist.all_reduce(t)
print(f"rank {dist.get_rank()} sum {t.item():.0f}", flush=True)
dist.destroy_process_group()
