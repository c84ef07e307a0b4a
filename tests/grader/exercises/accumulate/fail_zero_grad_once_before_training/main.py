"""Bug: the first accumulation window is right (mean / k, no_sync for all but the last), but the
gradients are cleared only once, before training: every later step also carries the gradients of
all earlier windows."""

from contextlib import nullcontext

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

K = 4


class Trainer:
    def __init__(self) -> None:
        g = torch.Generator().manual_seed(2)
        x = torch.randn(256, 6, generator=g)
        self.data = TensorDataset(x, (x.sum(1, keepdim=True) > 0).float())
        self.sampler = DistributedSampler(self.data)
        torch.manual_seed(1)
        self.model = DDP(nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 1)))
        self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-2)
        self.loss = nn.BCEWithLogitsLoss()

    def fit(self, epochs: int) -> None:
        self.opt.zero_grad()
        for epoch in range(epochs):
            self.sampler.set_epoch(epoch)
            for i, (x, y) in enumerate(DataLoader(self.data, batch_size=8, sampler=self.sampler)):
                step_now = (i + 1) % K == 0
                with nullcontext() if step_now else self.model.no_sync():
                    (self.loss(self.model(x), y) / K).backward()
                if step_now:
                    self.opt.step()


def main() -> None:
    dist.init_process_group("gloo")
    Trainer().fit(2)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
