"""Correct: the fixed program, with the process group's default timeout (no timeout=)."""

import argparse
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.algorithms.join import Join
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Subset, TensorDataset


def make_dataset(n):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 8, generator=g)
    y = (x.sum(dim=1) > 0).long()
    return TensorDataset(x, y)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=49)
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    data = make_dataset(args.samples)
    # Every sample once: rank r takes r, r + world_size, ...; shards may differ by one.
    shard = Subset(data, range(rank, len(data), world_size))
    loader = DataLoader(shard, batch_size=4)
    model = DDP(nn.Linear(8, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    for epoch in range(args.epochs):
        correct = torch.zeros(1)
        with Join([model]):
            for x, y in loader:
                optimizer.zero_grad()
                logits = model(x)
                F.cross_entropy(logits, y).backward()
                optimizer.step()
                correct += (logits.argmax(dim=1) == y).sum()
        dist.all_reduce(correct)
        if rank == 0:
            print(f"epoch {epoch}: accuracy {correct.item() / len(data):.2f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
