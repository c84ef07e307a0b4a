"""Rank 0 gathers the full model and optimizer state and torch.saves one file; every rank loads it."""

import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_state_dict,
    set_state_dict,
)
from torch.distributed.fsdp import fully_shard

CHECKPOINT = "full.pt"
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
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer)
    fully_shard(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    full = StateDictOptions(full_state_dict=True, cpu_offload=True)
    start = 0
    if os.path.exists(CHECKPOINT):
        saved = torch.load(CHECKPOINT, weights_only=False)
        set_state_dict(
            model,
            optimizer,
            model_state_dict=saved["model"],
            optim_state_dict=saved["optim"],
            options=full,
        )
        start = saved["step"]
    for step in range(start, start + STEPS):
        x, y = batch(step, rank, world)
        nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
        optimizer.zero_grad()
    model_sd, optim_sd = get_state_dict(model, optimizer, options=full)
    if rank == 0:
        torch.save({"model": model_sd, "optim": optim_sd, "step": start + STEPS}, CHECKPOINT)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
