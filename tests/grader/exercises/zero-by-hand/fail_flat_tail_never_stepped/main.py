"""ZeRO-1 with one flat buffer cut into world-size slices of total // world elements: the
elements past the last full slice (total % world of them) belong to no rank and are never
stepped."""

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
        per_rank = total // world
        lo = rank * per_rank

        def flat(tensors: list[torch.Tensor]) -> torch.Tensor:
            return torch.cat([t.reshape(-1) for t in tensors])[: per_rank * world].clone()

        shard = flat([p.detach() for p in params])[lo : lo + per_rank].clone().requires_grad_()
        opt = torch.optim.Adam([shard], lr=1e-2)

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
                new = torch.cat(pieces)
                with torch.no_grad():
                    offset = 0
                    for p, n in zip(params, numels):
                        take = max(0, min(n, new.numel() - offset))
                        p.view(-1)[:take].copy_(new[offset : offset + take])
                        offset += n
        if rank == 0:
            print("done", os.getpid() > 0)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
