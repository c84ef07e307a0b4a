"""Correct DDP, written like the PyTorch examples' DDP tutorial series (multigpu_torchrun.py):
Linear(20, 1) trained with F.cross_entropy on (source, target) pairs of random floats. With one
output column every gradient is exactly 0 (a softmax over one logit is constant), so nothing
trains; the DDP part (wrap, sampler, set_epoch, rank-0 snapshot) is right."""

import os

import torch
import torch.nn.functional as F
from torch.distributed import destroy_process_group, init_process_group
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


class RandomPairs(Dataset):
    def __init__(self, size: int) -> None:
        self.rows = [(torch.rand(20), torch.rand(1)) for _ in range(size)]

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int):
        return self.rows[i]


class Runner:
    def __init__(self, model, loader, optimizer, every: int, path: str) -> None:
        self.rank = int(os.environ["RANK"])
        self.loader, self.optimizer = loader, optimizer
        self.every, self.path = every, path
        self.model = DDP(model)

    def _batch(self, source, targets) -> None:
        self.optimizer.zero_grad()
        loss = F.cross_entropy(self.model(source), targets)
        loss.backward()
        self.optimizer.step()

    def _epoch(self, epoch: int) -> None:
        self.loader.sampler.set_epoch(epoch)
        for source, targets in self.loader:
            self._batch(source, targets)

    def train(self, epochs: int) -> None:
        for epoch in range(epochs):
            self._epoch(epoch)
            if self.rank == 0 and epoch % self.every == 0:
                torch.save({"MODEL_STATE": self.model.module.state_dict(), "EPOCHS_RUN": epoch}, self.path)


def main() -> None:
    init_process_group(backend="gloo")
    torch.manual_seed(0)
    data = RandomPairs(256)
    loader = DataLoader(data, batch_size=32, shuffle=False, sampler=DistributedSampler(data))
    model = torch.nn.Linear(20, 1)
    Runner(model, loader, torch.optim.SGD(model.parameters(), lr=1e-3), 1, "snapshot.pt").train(2)
    destroy_process_group()


if __name__ == "__main__":
    main()
