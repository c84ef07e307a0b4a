"""A small classifier trained with DDP. It trains fine as one process, but under torchrun with
2 or 3 workers it stops making progress. Find where each rank waits, and fix it.

Run it:  torchrun --standalone --nproc-per-node 2 main.py --samples 25
"""

import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Subset, TensorDataset

BATCH_SIZE = 4  # per process


def make_dataset(n: int) -> TensorDataset:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 8, generator=g)
    y = (x.sum(dim=1) > 0).long()
    return TensorDataset(x, y)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=49)
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)

    data = make_dataset(args.samples)
    # Rank r takes samples r, r + world_size, r + 2 * world_size, ...: every sample once.
    shard = Subset(data, range(rank, len(data), world_size))
    loader = DataLoader(shard, batch_size=BATCH_SIZE, shuffle=False)

    model = DDP(nn.Linear(8, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    for epoch in range(args.epochs):
        correct = torch.zeros(1)
        for x, y in loader:
            optimizer.zero_grad()
            logits = model(x)
            F.cross_entropy(logits, y).backward()
            optimizer.step()
            correct += (logits.argmax(dim=1) == y).sum()
        if rank == 0:
            dist.all_reduce(correct)  # the correct answers of every rank
            print(f"epoch {epoch}: accuracy {correct.item() / len(data):.2f}", flush=True)

    if int(os.environ.get("LOCAL_RANK", 0)) == 0:
        print("done")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
