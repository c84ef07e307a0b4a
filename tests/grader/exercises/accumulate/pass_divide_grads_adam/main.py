"""Correct: a functional loop that writes out both branches (no_sync, then the synced last
micro-batch), back-propagates the unscaled loss and divides the accumulated gradients by k
before an Adam step."""

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

K = 4


def batches(rank: int, world: int, epoch: int):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(256, 10, generator=g)
    y = (x[:, :1] > 0).float()
    order = torch.randperm(256, generator=torch.Generator().manual_seed(epoch))
    mine = order[rank::world]
    for start in range(0, len(mine), 8):
        idx = mine[start : start + 8]
        yield x[idx], y[idx]


def main() -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 1)))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(2):
        window = []
        for xb, yb in batches(rank, world, epoch):
            window.append((xb, yb))
            if len(window) < K:
                continue
            for xs, ys in window[:-1]:
                with model.no_sync():
                    nn.functional.binary_cross_entropy_with_logits(model(xs), ys).backward()
            xs, ys = window[-1]
            loss = nn.functional.binary_cross_entropy_with_logits(model(xs), ys)
            loss.backward()
            for p in model.parameters():
                p.grad.div_(K)
            optimizer.step()
            optimizer.zero_grad()
            window = []
        print(f"rank {rank} epoch {epoch} loss {loss.item():.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
