"""Each rank builds a dataset of its own: its strided slice of the data, so its indices start
at 0 like every other rank's. Join evens out the one-batch difference; the metric is reduced on
every rank."""

import argparse
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.algorithms.join import Join
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset


def my_slice(n: int, rank: int, world: int) -> TensorDataset:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 8, generator=g)
    y = (x.sum(dim=1) > 0).long()
    return TensorDataset(x[rank::world].clone(), y[rank::world].clone())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=25)
    args = parser.parse_args()
    dist.init_process_group("gloo", timeout=timedelta(minutes=1))
    rank, world = dist.get_rank(), dist.get_world_size()
    try:
        torch.manual_seed(0)
        mine = my_slice(args.samples, rank, world)
        loader = DataLoader(mine, batch_size=4)
        model = DDP(nn.Linear(8, 2))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in range(2):
            hits = torch.zeros(1)
            with Join([model]):
                for x, y in loader:
                    opt.zero_grad()
                    out = model(x)
                    F.cross_entropy(out, y).backward()
                    opt.step()
                    hits += (out.argmax(1) == y).sum()
            dist.all_reduce(hits)
            if rank == 0:
                print(f"epoch {epoch} accuracy {hits.item() / args.samples:.2f}")
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
