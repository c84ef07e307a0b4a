"""A small classifier trained with DDP that cannot hang at any world size or dataset length.

Run it:  torchrun --standalone --nproc-per-node 3 main.py --samples 23
"""

import argparse
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.algorithms.join import Join
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

    # A finite timeout while hunting a hang: a collective that one rank never reaches fails
    # after 2 minutes, with each rank's line, instead of waiting for 30.
    dist.init_process_group("gloo", timeout=timedelta(minutes=2))
    try:
        train(args.samples, args.epochs)
    finally:
        dist.destroy_process_group()


def train(samples: int, epochs: int) -> None:
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)

    data = make_dataset(samples)
    # Every sample once per epoch; the shards may differ by one sample, so a rank may have one
    # batch more than another (whether it does depends on the length).
    shard = Subset(data, range(rank, len(data), world_size))
    loader = DataLoader(shard, batch_size=BATCH_SIZE, shuffle=False)

    model = DDP(nn.Linear(8, 2))
    # Plain SGD keeps no state: a rank that joined early and skipped steps is equal to the
    # others again once Join has copied the final weights to it (with momentum or Adam it would
    # not be: its optimizer state would differ; give every rank equal batches then).
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    for epoch in range(epochs):
        correct = torch.zeros(1)
        # Join: a rank that runs out of batches first shadows the gradient all-reduces of the
        # others until every rank has finished the epoch.
        with Join([model]):
            for x, y in loader:
                optimizer.zero_grad()
                logits = model(x)
                F.cross_entropy(logits, y).backward()
                optimizer.step()
                correct += (logits.argmax(dim=1) == y).sum()
        # Every rank calls the same collective, after Join; only the printing is rank 0's.
        dist.all_reduce(correct)
        if rank == 0:
            print(f"epoch {epoch}: accuracy {correct.item() / len(data):.2f}", flush=True)


if __name__ == "__main__":
    main()
