"""Bug: every rank writes the checkpoint."""

import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

EPOCHS = 3


def make_data():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(256, 8, generator=g)
    y = x.sum(dim=1, keepdim=True) + 0.1 * torch.randn(256, 1, generator=g)
    return TensorDataset(x, y)


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    world_size = dist.get_world_size()

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    ddp_model = DDP(model)

    dataset = make_data()
    sampler = DistributedSampler(dataset, shuffle=True)
    loader = DataLoader(dataset, batch_size=32, sampler=sampler)
    optimizer = torch.optim.SGD(ddp_model.parameters(), lr=0.05)

    for epoch in range(EPOCHS):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(ddp_model(xb), yb)
            loss.backward()
            optimizer.step()
        print(f"rank {rank}/{world_size} epoch {epoch} loss {loss.item():.4f}")
        torch.save(ddp_model.module.state_dict(), "model.pt")
        dist.barrier()

    dist.destroy_process_group()


if __name__ == "__main__":
    main()
