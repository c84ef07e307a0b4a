"""Correct: a classifier with Dropout and BatchNorm (per-rank statistics, per-rank RNG),
AdamW, a DataLoader with a worker process, and a snapshot of model + optimizer state."""

import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Linear(12, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Dropout(0.3))
        self.classifier = nn.Linear(32, 4)

    def forward(self, x):
        return self.classifier(self.features(x))


def run(rank: int, world_size: int) -> None:
    torch.manual_seed(0)
    x = torch.randn(320, 12)
    labels = (x[:, :4].argmax(dim=1)).long()
    dataset = TensorDataset(x, labels)
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=7)
    loader = DataLoader(dataset, batch_size=40, sampler=sampler, num_workers=1)

    torch.manual_seed(rank + 100)  # different dropout masks per rank
    model = DistributedDataParallel(Net())
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    criterion = nn.CrossEntropyLoss()
    for epoch in range(3):
        sampler.set_epoch(epoch)
        model.train()
        correct = 0
        for inputs, targets in loader:
            logits = model(inputs)
            loss = criterion(logits, targets)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            correct += (logits.argmax(1) == targets).sum().item()
        print(f"[rank {rank}] epoch {epoch}: {correct} correct")
        if rank == 0:
            torch.save(
                {"epoch": epoch, "model": model.module.state_dict(), "optimizer": optimizer.state_dict()},
                "snapshot.pt",
            )
    dist.barrier()


if __name__ == "__main__":
    dist.init_process_group("gloo")
    try:
        run(dist.get_rank(), dist.get_world_size())
    finally:
        dist.destroy_process_group()
