"""Trains with DDP and a DistributedSampler but never writes a snapshot: a restart starts over."""

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main() -> None:
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = DDP(nn.Linear(5, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(0)
    ds = TensorDataset(torch.randn(48, 5, generator=g), torch.randn(48, 1, generator=g))
    sampler = DistributedSampler(ds)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        for x, y in DataLoader(ds, batch_size=6, sampler=sampler):
            opt.zero_grad()
            nn.functional.mse_loss(model(x), y).backward()
            opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
