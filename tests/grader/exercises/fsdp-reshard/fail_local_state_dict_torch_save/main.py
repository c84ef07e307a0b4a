"""Every rank torch.saves its own model.state_dict() (its local shards) and loads its own file back."""

import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.fsdp import fully_shard

STEPS = 4
GLOBAL_BATCH = 12


def batch(step, rank, world):
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(GLOBAL_BATCH, 16, generator=g)
    y = x.sum(dim=1, keepdim=True)
    per = GLOBAL_BATCH // world
    return x[rank * per : (rank + 1) * per], y[rank * per : (rank + 1) * per]


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1))
    fully_shard(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
    os.makedirs("ckpt", exist_ok=True)
    path = f"ckpt/rank{rank}.pt"
    if os.path.exists("ckpt/rank0.pt"):
        model.load_state_dict(torch.load(path, weights_only=False))
    for step in range(STEPS):
        x, y = batch(step, rank, world)
        nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
        optimizer.zero_grad()
    torch.save(model.state_dict(), path)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
