"""A Trainer that snapshots every 6 optimizer steps (mid-epoch) and resumes at the saved step.

15 steps per rank per epoch, 3 epochs: the first snapshot exists only after step 6. The snapshot is
a dict with the global step; on resume the loader skips the batches of the epoch already done.
"""

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


@dataclass
class Config:
    epochs: int = 3
    batch_size: int = 4
    save_every: int = 6
    snapshot_dir: str = "run-output"


class Trainer:
    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.rank = dist.get_rank()
        torch.manual_seed(1)
        self.net = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
        self.opt = torch.optim.SGD(self.net.parameters(), lr=0.05, momentum=0.8)
        self.global_step = 0
        self.path = os.path.join(cfg.snapshot_dir, "latest.ckpt")
        if os.path.isfile(self.path):
            state = torch.load(self.path, map_location="cpu")
            self.net.load_state_dict(state["weights"])
            self.opt.load_state_dict(state["optim"])
            self.global_step = state["global_step"]
        self.model = DistributedDataParallel(self.net)
        g = torch.Generator().manual_seed(3)
        x = torch.randn(120, 6, generator=g)
        y = x.sum(dim=1, keepdim=True) + 0.05 * torch.randn(120, 1, generator=g)
        self.sampler = DistributedSampler(TensorDataset(x, y), shuffle=True, seed=11)
        self.loader = DataLoader(TensorDataset(x, y), batch_size=cfg.batch_size, sampler=self.sampler)

    def _snapshot(self) -> None:
        if self.rank == 0:
            os.makedirs(self.cfg.snapshot_dir, exist_ok=True)
            tmp = self.path + ".partial"
            torch.save(
                {"weights": self.net.state_dict(), "optim": self.opt.state_dict(),
                 "global_step": self.global_step},
                tmp,
            )
            os.replace(tmp, self.path)
        dist.barrier()

    def fit(self) -> None:
        per_epoch = len(self.loader)
        for epoch in range(self.global_step // per_epoch, self.cfg.epochs):
            self.sampler.set_epoch(epoch)
            skip = self.global_step - epoch * per_epoch
            for i, (x, y) in enumerate(self.loader):
                if i < skip:
                    continue
                self.opt.zero_grad(set_to_none=True)
                F.mse_loss(self.model(x), y).backward()
                self.opt.step()
                self.global_step += 1
                if self.global_step % self.cfg.save_every == 0:
                    self._snapshot()


if __name__ == "__main__":
    dist.init_process_group("gloo")
    try:
        Trainer(Config()).fit()
    finally:
        dist.destroy_process_group()
