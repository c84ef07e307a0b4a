"""A class-based trainer that averages gradients by hand: same seed on every rank, Adam."""

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.hidden = nn.Linear(10, 16)
        self.out = nn.Linear(16, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.tanh(self.hidden(x)))


class Trainer:
    def __init__(self) -> None:
        dist.init_process_group()
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        torch.manual_seed(1234)  # identical initial weights everywhere
        self.model = Net()
        self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-2)
        g = torch.Generator().manual_seed(0)
        x = torch.randn(96, 10, generator=g)
        y = x.sum(dim=1, keepdim=True)
        self.data = TensorDataset(x, y)
        self.sampler = DistributedSampler(self.data, seed=3)
        self.loader = DataLoader(self.data, batch_size=8, sampler=self.sampler)

    def sync_grads(self) -> None:
        for param in self.model.parameters():
            dist.all_reduce(param.grad)
            param.grad /= self.world

    def fit(self, epochs: int) -> None:
        for epoch in range(epochs):
            self.sampler.set_epoch(epoch)
            for xb, yb in self.loader:
                self.opt.zero_grad(set_to_none=True)
                F.mse_loss(self.model(xb), yb).backward()
                self.sync_grads()
                self.opt.step()

    def close(self) -> None:
        dist.destroy_process_group()


if __name__ == "__main__":
    trainer = Trainer()
    try:
        trainer.fit(2)
    finally:
        trainer.close()
