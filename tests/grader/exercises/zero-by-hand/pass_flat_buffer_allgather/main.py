"""ZeRO-1 with one flat buffer: every rank steps one padded slice of all parameters, then the
slices are all-gathered and copied back into the model. The learning rate follows a cosine
schedule."""

import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def data() -> TensorDataset:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(256, 16, generator=g)
    y = x @ torch.randn(16, 1, generator=g) + 0.1 * torch.randn(256, 1, generator=g)
    return TensorDataset(x, y)


def main() -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    try:
        torch.manual_seed(0)
        layers = [nn.Linear(16, 32), nn.ReLU()]
        for _ in range(3):
            layers += [nn.Linear(32, 32), nn.ReLU()]
        model = DDP(nn.Sequential(*layers, nn.Linear(32, 1)))
        params = list(model.parameters())
        numels = [p.numel() for p in params]
        total = sum(numels)
        per_rank = -(-total // world)  # ceil: the last slice is padded
        lo = rank * per_rank

        def flat(tensors: list[torch.Tensor]) -> torch.Tensor:
            out = torch.zeros(per_rank * world)
            out[:total] = torch.cat([t.reshape(-1) for t in tensors])
            return out

        shard = flat([p.detach() for p in params])[lo : lo + per_rank].clone().requires_grad_()
        opt = torch.optim.Adam([shard], lr=1e-2)
        schedule = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=12)

        ds = data()
        sampler = DistributedSampler(ds, seed=0)
        loader = DataLoader(ds, batch_size=16, sampler=sampler)
        for epoch in range(2):
            sampler.set_epoch(epoch)
            for x, y in loader:
                model.zero_grad()
                nn.functional.mse_loss(model(x), y).backward()
                shard.grad = flat([p.grad for p in params])[lo : lo + per_rank].clone()
                opt.step()
                pieces = [torch.empty(per_rank) for _ in range(world)]
                dist.all_gather(pieces, shard.detach())
                new = torch.cat(pieces)[:total]
                with torch.no_grad():
                    for p, chunk in zip(params, new.split(numels)):
                        p.copy_(chunk.view_as(p))
                schedule.step()
        if rank == 0:
            print("done", os.getpid() > 0)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
