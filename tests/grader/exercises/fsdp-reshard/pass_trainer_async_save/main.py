"""A Trainer class; a checkpoint every 2 steps with dcp.async_save on a process group of its own
(waited on before the next); an AppState with the step counter; AdamW."""

import os

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.nn as nn
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.fsdp import fully_shard


class AppState:
    def __init__(self, trainer):
        self.trainer = trainer

    def state_dict(self):
        model, optim = get_state_dict(self.trainer.model, self.trainer.optimizer)
        return {"model": model, "optim": optim, "global_step": self.trainer.global_step}

    def load_state_dict(self, sd):
        set_state_dict(
            self.trainer.model,
            self.trainer.optimizer,
            model_state_dict=sd["model"],
            optim_state_dict=sd["optim"],
        )
        self.trainer.global_step = sd["global_step"]


class Trainer:
    def __init__(self, ckpt_dir="checkpoints/latest", steps=6, every=2):
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        torch.manual_seed(0)
        self.model = nn.Sequential(nn.Linear(8, 32), nn.GELU(), nn.Linear(32, 2))
        for layer in self.model:
            if isinstance(layer, nn.Linear):
                fully_shard(layer)
        fully_shard(self.model)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=3e-3)
        self.ckpt_dir, self.steps, self.every = ckpt_dir, steps, every
        self.global_step = 0
        self.pending = None
        # async_save writes in a background thread: its collectives get a group of their own.
        self.ckpt_group = dist.new_group(backend="gloo")

    def data(self, step):
        g = torch.Generator().manual_seed(7 * step + 3)
        x = torch.randn(24, 8, generator=g)
        y = (x[:, :1] > 0).long().squeeze(1)
        per = 24 // self.world
        sl = slice(self.rank * per, (self.rank + 1) * per)
        return x[sl], y[sl]

    def checkpoint(self):
        if self.pending is not None:
            self.pending.result()
        self.pending = dcp.async_save(
            {"app": AppState(self)}, checkpoint_id=self.ckpt_dir, process_group=self.ckpt_group
        )

    def fit(self):
        if os.path.exists(os.path.join(self.ckpt_dir, ".metadata")):
            dcp.load({"app": AppState(self)}, checkpoint_id=self.ckpt_dir)
        for _ in range(self.steps):
            x, y = self.data(self.global_step)
            loss = nn.functional.cross_entropy(self.model(x), y)
            loss.backward()
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
            self.global_step += 1
            if self.global_step % self.every == 0:
                self.checkpoint()
        if self.pending is not None:
            self.pending.result()


def main():
    dist.init_process_group("gloo")
    try:
        Trainer().fit()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
