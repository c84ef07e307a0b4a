"""Lightning-like callbacks without Lightning: a checkpoint callback that fires every 2nd epoch.

The snapshot is split in two files (weights, then trainer state) written through a temp name.
"""

import os
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


class Callback:
    def on_fit_start(self, loop: "Loop") -> None: ...
    def on_epoch_end(self, loop: "Loop") -> None: ...


class Checkpoint(Callback):
    def __init__(self, folder: str, every: int) -> None:
        self.folder, self.every = Path(folder), every

    def on_fit_start(self, loop: "Loop") -> None:
        weights, state = self.folder / "weights.pt", self.folder / "trainer.pt"
        if weights.exists() and state.exists():
            loop.module.load_state_dict(torch.load(weights))
            saved = torch.load(state)
            loop.optimizer.load_state_dict(saved["optimizer"])
            loop.epoch = saved["next_epoch"]

    def on_epoch_end(self, loop: "Loop") -> None:
        if (loop.epoch + 1) % self.every == 0 and loop.is_global_zero:
            self.folder.mkdir(exist_ok=True)
            for name, obj in (
                ("weights.pt", loop.module.state_dict()),
                ("trainer.pt", {"optimizer": loop.optimizer.state_dict(),
                                "next_epoch": loop.epoch + 1}),
            ):
                torch.save(obj, self.folder / (name + ".tmp"))
                os.rename(self.folder / (name + ".tmp"), self.folder / name)
        dist.barrier()


class Loop:
    def __init__(self, module: nn.Module, callbacks: list[Callback], max_epochs: int) -> None:
        self.module, self.callbacks, self.max_epochs = module, callbacks, max_epochs
        self.optimizer = torch.optim.RMSprop(module.parameters(), lr=0.01)
        self.epoch = 0
        self.is_global_zero = dist.get_rank() == 0

    def fit(self, dataset: TensorDataset) -> None:
        for cb in self.callbacks:
            cb.on_fit_start(self)
        ddp = DDP(self.module)
        sampler = DistributedSampler(dataset)
        loader = DataLoader(dataset, batch_size=5, sampler=sampler, drop_last=True)
        while self.epoch < self.max_epochs:
            sampler.set_epoch(self.epoch)
            for x, y in loader:
                self.optimizer.zero_grad()
                nn.functional.smooth_l1_loss(ddp(x), y).backward()
                self.optimizer.step()
            for cb in self.callbacks:
                cb.on_epoch_end(self)
            self.epoch += 1


def main() -> None:
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(44, 3, generator=g)
    ds = TensorDataset(x, x.pow(2).sum(1, keepdim=True))
    Loop(nn.Sequential(nn.Linear(3, 12), nn.GELU(), nn.Linear(12, 1)),
         [Checkpoint("ckpts", every=2)], max_epochs=6).fit(ds)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
