"""Rank 1 falls asleep before its first collective: rank 0 waits in it until the process group's
timeout, and rank 1 is the one to look at."""

import time
from datetime import timedelta

import torch
import torch.distributed as dist


def load_batch(rank):
    if rank == 1:
        time.sleep(120)  # rank 1 never gets to the all-reduce
    return torch.ones(4) * (rank + 1)


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=4))
    rank = dist.get_rank()
    batch = load_batch(rank)
    dist.all_reduce(batch)
    print(f"rank {rank}: {batch.tolist()}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
