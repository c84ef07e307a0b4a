"""Backbone and head trained as two DDP wraps with two optimizers: the backbone is converted to
SyncBatchNorm, and so is the head: every wrapped module is converted."""

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def main() -> None:
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    backbone = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                             nn.AdaptiveAvgPool2d(1), nn.Flatten())
    head = nn.Sequential(nn.Linear(8, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))
    backbone = DDP(nn.SyncBatchNorm.convert_sync_batchnorm(backbone))
    head = DDP(nn.SyncBatchNorm.convert_sync_batchnorm(head))
    opts = [torch.optim.SGD(backbone.parameters(), lr=0.05),
            torch.optim.Adam(head.parameters(), lr=1e-3)]
    g = torch.Generator().manual_seed(dist.get_rank())
    for _ in range(4):
        x, y = torch.randn(6, 3, 8, 8, generator=g), torch.randint(0, 3, (6,), generator=g)
        for o in opts:
            o.zero_grad()
        nn.functional.cross_entropy(head(backbone(x)), y).backward()
        for o in opts:
            o.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
