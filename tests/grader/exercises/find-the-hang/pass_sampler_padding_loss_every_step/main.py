"""Correct: DistributedSampler's padding makes equal batches; every rank all-reduces the loss at every step for logging."""

import argparse
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


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

    dist.init_process_group("gloo", timeout=timedelta(minutes=2))
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    data = make_dataset(args.samples)
    # DistributedSampler pads the shards to equal length with repeated samples.
    sampler = DistributedSampler(data, shuffle=True, seed=0)
    loader = DataLoader(data, batch_size=4, sampler=sampler)
    model = DDP(nn.Linear(8, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for x, y in loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            logged = loss.detach().clone()
            dist.all_reduce(logged, op=dist.ReduceOp.SUM)
            if rank == 0:
                print(f"epoch {epoch}: loss {logged.item() / world_size:.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
