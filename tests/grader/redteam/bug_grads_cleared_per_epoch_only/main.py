"""Bug, Trainer-class style: `zero_grad` sits at the top of each epoch instead of each batch, so
within an epoch every step carries the gradients of the steps before it (momentum-free SGD makes
it a growing sum). The first step of each epoch is right."""

import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler


class Blobs(Dataset):
    def __init__(self) -> None:
        g = torch.Generator().manual_seed(6)
        self.x = torch.randn(200, 5, generator=g)
        self.y = (self.x[:, 0] > self.x[:, 1]).long()

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int):
        return {"features": self.x[i], "label": self.y[i]}


class Trainer:
    def __init__(self) -> None:
        self.rank = int(os.environ["RANK"])
        torch.manual_seed(3)
        self.model = DDP(nn.Sequential(nn.Linear(5, 16), nn.SiLU(), nn.Linear(16, 2)))
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.05)
        data = Blobs()
        self.sampler = DistributedSampler(data, shuffle=True)
        self.loader = DataLoader(data, batch_size=20, sampler=self.sampler)

    def run_epoch(self, epoch: int) -> None:
        self.sampler.set_epoch(epoch)
        self.optimizer.zero_grad()
        for batch in self.loader:
            logits = self.model(batch["features"])
            nn.functional.cross_entropy(logits, batch["label"]).backward()
            self.optimizer.step()

    def train(self, epochs: int) -> None:
        for epoch in range(epochs):
            self.run_epoch(epoch)
            if self.rank == 0:
                torch.save(self.model.module.state_dict(), "checkpoint.pt")


def main() -> None:
    dist.init_process_group("gloo")
    Trainer().train(2)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
