"""Shard a model with FSDP2, save a distributed checkpoint, resume it at another world size.

Run it three times, at three world sizes, from the same folder:
    torchrun --standalone --nproc-per-node 2 main.py
    torchrun --standalone --nproc-per-node 3 main.py
    torchrun --standalone --nproc-per-node 1 main.py
Each run should train STEPS_PER_RUN more steps from where the previous one stopped.
Right now rank 0 gathers the whole model into one file and a resumed run starts over at
step 0 with a fresh optimizer. Work through the TODOs.
"""

import os

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp  # noqa: F401
import torch.nn as nn
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    set_model_state_dict,
)
from torch.distributed.fsdp import fully_shard

CHECKPOINT = "checkpoint.pt"  # TODO: a folder, where every rank writes its own shards
STEPS_PER_RUN = 4
GLOBAL_BATCH = 12  # split evenly over 1, 2 or 3 ranks


def batch(step: int, rank: int, world: int) -> tuple[torch.Tensor, torch.Tensor]:
    """This rank's slice of the global batch of `step` (the same data at any world size)."""
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(GLOBAL_BATCH, 16, generator=g)
    y = x.sum(dim=1, keepdim=True)
    per = GLOBAL_BATCH // world
    return x[rank * per : (rank + 1) * per], y[rank * per : (rank + 1) * per]


def main() -> None:
    dist.init_process_group(backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 1))
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer)
    fully_shard(model)  # every parameter is now a DTensor: 1/world of it on each rank
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)

    full = StateDictOptions(full_state_dict=True, cpu_offload=True)
    start = 0  # TODO: continue from the step the checkpoint was saved at
    if os.path.exists(CHECKPOINT):
        # TODO: load the model, the optimizer and the step with torch.distributed.checkpoint
        set_model_state_dict(model, torch.load(CHECKPOINT), options=full)

    for step in range(start, start + STEPS_PER_RUN):
        x, y = batch(step, rank, world)
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()

    # TODO: every rank saves its own shards (model, optimizer and step) with dcp.save
    model_state = get_model_state_dict(model, options=full)  # the whole model, gathered
    if rank == 0:
        torch.save(model_state, CHECKPOINT)
    dist.barrier()
    if rank == 0:
        print(f"world size {world}: trained {STEPS_PER_RUN} steps, loss {loss.item():.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
