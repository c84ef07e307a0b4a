"""Shard a model with FSDP2, save a distributed checkpoint, resume it at another world size.

Run it three times, at three world sizes, from the same folder:
    torchrun --standalone --nproc-per-node 2 main.py
    torchrun --standalone --nproc-per-node 3 main.py
    torchrun --standalone --nproc-per-node 1 main.py
Each run trains STEPS_PER_RUN more steps from where the previous one stopped.
"""

import os

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.nn as nn
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.checkpoint.stateful import Stateful
from torch.distributed.fsdp import fully_shard

CHECKPOINT = "checkpoint"  # a folder: every rank writes its own shards into it
STEPS_PER_RUN = 4
GLOBAL_BATCH = 12  # split evenly over 1, 2 or 3 ranks


def batch(step: int, rank: int, world: int) -> tuple[torch.Tensor, torch.Tensor]:
    """This rank's slice of the global batch of `step` (the same data at any world size)."""
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(GLOBAL_BATCH, 16, generator=g)
    y = x.sum(dim=1, keepdim=True)
    per = GLOBAL_BATCH // world
    return x[rank * per : (rank + 1) * per], y[rank * per : (rank + 1) * per]


class TrainState(Stateful):
    """What a resumed run needs: the model, the optimizer and the step, saved and loaded as one."""

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
        self.model, self.optimizer, self.step = model, optimizer, 0

    def state_dict(self) -> dict:
        model_state, optim_state = get_state_dict(self.model, self.optimizer)
        return {"model": model_state, "optimizer": optim_state, "step": self.step}

    def load_state_dict(self, state: dict) -> None:
        set_state_dict(
            self.model,
            self.optimizer,
            model_state_dict=state["model"],
            optim_state_dict=state["optimizer"],
        )
        self.step = state["step"]


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

    state = TrainState(model, optimizer)
    if os.path.exists(os.path.join(CHECKPOINT, ".metadata")):
        # Every rank reads the slices of the saved shards it now owns, at any world size.
        dcp.load({"train": state}, checkpoint_id=CHECKPOINT)

    for step in range(state.step, state.step + STEPS_PER_RUN):
        x, y = batch(step, rank, world)
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        state.step = step + 1

    # Every rank writes its own shards; no rank gathers the whole model.
    dcp.save({"train": state}, checkpoint_id=CHECKPOINT)
    if rank == 0:
        print(f"world size {world}: trained up to step {state.step}, loss {loss.item():.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
