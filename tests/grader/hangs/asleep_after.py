"""Both ranks meet in a first all-reduce; then rank 1 sleeps while rank 0 waits in the second."""

import time
from datetime import timedelta

import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=timedelta(seconds=4))
rank = dist.get_rank()
total = torch.tensor([float(rank)])
dist.all_reduce(total)
print(f"rank {rank}: first sum {total.item()}", flush=True)
if rank == 1:
    time.sleep(120)
dist.all_reduce(total)
dist.destroy_process_group()
