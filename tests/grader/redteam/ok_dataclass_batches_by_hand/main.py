"""Correct, no DataLoader: each rank takes a strided shard of a shuffled index list (reshuffled
every epoch with a shared seed) and feeds the DDP model dataclass batches as keyword arguments
(`model(batch=...)`); the model reads the batch's fields."""

from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


@dataclass
class Batch:
    features: torch.Tensor
    target: torch.Tensor


class Regressor(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(7, 10), nn.ReLU(), nn.Linear(10, 1))

    def forward(self, *, batch: Batch) -> torch.Tensor:
        return nn.functional.huber_loss(self.net(batch.features), batch.target)


def main() -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    g = torch.Generator().manual_seed(8)
    x = torch.randn(144, 7, generator=g)
    y = torch.sin(x[:, :1]) + 0.05 * torch.randn(144, 1, generator=g)
    torch.manual_seed(2)
    model = DDP(Regressor())
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    for epoch in range(2):
        order = torch.randperm(144, generator=torch.Generator().manual_seed(100 + epoch))
        mine = order[rank::world]
        for start in range(0, len(mine), 12):
            idx = mine[start : start + 12]
            opt.zero_grad()
            loss = model(batch=Batch(features=x[idx], target=y[idx]))
            loss.backward()
            opt.step()
    if rank == 0:
        torch.save(model.module.state_dict(), "regressor.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
