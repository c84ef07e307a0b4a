import argparse
import os
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


@dataclass
class Config:
    epochs: int = 2
    batch_size: int = 16
    lr: float = 0.05
    seed: int = 0
    ckpt: str = "checkpoint.pt"
    hidden: list[int] = field(default_factory=lambda: [32, 16])
    local_rank: int = 0


def parse() -> Config:
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=Config.epochs)
    p.add_argument("--batch-size", type=int, default=Config.batch_size)
    p.add_argument("--lr", type=float, default=Config.lr)
    # old torch.distributed.launch passed --local_rank; torchrun exports LOCAL_RANK instead
    p.add_argument("--local-rank", "--local_rank", type=int, default=int(os.environ.get("LOCAL_RANK", 0)))
    a = p.parse_args()
    return Config(epochs=a.epochs, batch_size=a.batch_size, lr=a.lr, local_rank=a.local_rank)


def build(cfg: Config) -> nn.Module:
    layers, d = [], 10
    for h in cfg.hidden:
        layers += [nn.Linear(d, h), nn.ReLU()]
        d = h
    layers.append(nn.Linear(d, 1))
    return nn.Sequential(*layers)


def main(cfg: Config) -> None:
    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.set_device(cfg.local_rank)
    device = torch.device("cuda", cfg.local_rank) if cuda else torch.device("cpu")
    dist.init_process_group(backend="nccl" if cuda else "gloo")
    try:
        g = torch.Generator().manual_seed(cfg.seed)
        x = torch.randn(320, 10, generator=g)
        y = torch.sin(x[:, :1]) + 0.05 * torch.randn(320, 1, generator=g)
        ds = TensorDataset(x, y)
        sampler = DistributedSampler(ds, seed=cfg.seed)
        loader = DataLoader(ds, batch_size=cfg.batch_size, sampler=sampler)
        torch.manual_seed(cfg.seed)
        model = DDP(build(cfg).to(device), device_ids=[cfg.local_rank] if cuda else None)
        opt = torch.optim.SGD(model.parameters(), lr=cfg.lr)
        for epoch in range(cfg.epochs):
            sampler.set_epoch(epoch)
            for xb, yb in loader:
                opt.zero_grad()
                nn.functional.mse_loss(model(xb.to(device)), yb.to(device)).backward()
                opt.step()
        if dist.get_rank() == 0:
            torch.save(model.module.state_dict(), cfg.ckpt)
        dist.barrier()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main(parse())
