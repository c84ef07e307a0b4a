"""Correct: a Trainer class whose context-manager helper turns DDP's sync off for all but the
last micro-batch of each accumulation window."""

import contextlib
from collections.abc import Iterator

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


class Trainer:
    def __init__(self, accum_steps: int = 4) -> None:
        self.accum_steps = accum_steps
        torch.manual_seed(0)
        self.model = DDP(nn.Sequential(nn.Linear(10, 32), nn.Tanh(), nn.Linear(32, 1)))
        g = torch.Generator().manual_seed(0)
        x = torch.randn(256, 10, generator=g)
        y = x @ torch.randn(10, 1, generator=g)
        self.sampler = DistributedSampler(TensorDataset(x, y), seed=0)
        self.loader = DataLoader(TensorDataset(x, y), batch_size=8, sampler=self.sampler)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.05, momentum=0.9)

    @contextlib.contextmanager
    def micro_step(self, index: int) -> Iterator[bool]:
        boundary = (index + 1) % self.accum_steps == 0
        if boundary:
            yield True
        else:
            with self.model.no_sync():
                yield False

    def epoch(self, epoch: int) -> float:
        self.sampler.set_epoch(epoch)
        total = 0.0
        for i, (x, y) in enumerate(self.loader):
            with self.micro_step(i) as boundary:
                loss = nn.functional.mse_loss(self.model(x), y)
                (loss / self.accum_steps).backward()
            total += loss.item()
            if boundary:
                self.optimizer.step()
                self.optimizer.zero_grad(set_to_none=True)
        return total / len(self.loader)


def main() -> None:
    dist.init_process_group("gloo")
    try:
        trainer = Trainer()
        for epoch in range(2):
            print(f"epoch {epoch} loss {trainer.epoch(epoch):.4f}")
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
