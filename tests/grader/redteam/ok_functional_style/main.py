"""Functional style: small pure-ish functions composed in main()."""
from __future__ import annotations

import os
from functools import partial
from typing import Callable, Iterable

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def device_for(local_rank: int) -> torch.device:
    return torch.device("cuda", local_rank) if torch.cuda.is_available() else torch.device("cpu")


def make_data(n: int = 240, d: int = 6) -> TensorDataset:
    g = torch.Generator().manual_seed(42)
    x = torch.randn(n, d, generator=g)
    y = torch.randint(0, 3, (n,), generator=g)
    return TensorDataset(x, y)


def step(model: nn.Module, opt: torch.optim.Optimizer, loss_fn: Callable, batch, device) -> float:
    x, y = (t.to(device) for t in batch)
    opt.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
    return loss.item()


def run_epoch(model, opt, loader: Iterable, loss_fn, device) -> float:
    losses = [step(model, opt, loss_fn, b, device) for b in loader]
    return sum(losses) / max(1, len(losses))


def main() -> None:
    local_rank = int(os.environ["LOCAL_RANK"])
    device = device_for(local_rank)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
    try:
        data = make_data()
        sampler = DistributedSampler(data)
        loader = DataLoader(data, batch_size=24, sampler=sampler)
        model = DDP(
            nn.Sequential(nn.Linear(6, 12), nn.GELU(), nn.Linear(12, 3)).to(device),
            device_ids=[local_rank] if device.type == "cuda" else None,
        )
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        loss_fn = partial(F.cross_entropy, label_smoothing=0.05)
        for epoch in range(3):
            sampler.set_epoch(epoch)
            avg = run_epoch(model, opt, loader, loss_fn, device)
            if dist.get_rank() == 0:
                print(f"epoch={epoch} loss={avg:.3f}")
                torch.save(model.module.state_dict(), "ckpt.pt")
            dist.barrier()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
