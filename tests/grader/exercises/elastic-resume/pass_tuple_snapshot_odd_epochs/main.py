"""Functional loop; snapshot is a tuple (epoch, model, optimizer) in an oddly named file.

50 samples per rank with batches of 7: 8 steps per epoch, the last one short.
"""

import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

SNAP = "snap shot (rank0) v.1.pth"


def data() -> TensorDataset:
    g = torch.Generator().manual_seed(5)
    x = torch.randn(100, 4, generator=g)
    return TensorDataset(x, (x[:, :1] > 0).float())


def build() -> tuple[nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(2)
    net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    return net, torch.optim.AdamW(net.parameters(), lr=0.01, weight_decay=0.01)


def restore(net: nn.Module, opt: torch.optim.Optimizer) -> int:
    if not os.path.exists(SNAP):
        return 0
    epoch, weights, optim_state = torch.load(SNAP, weights_only=True)
    net.load_state_dict(weights)
    opt.load_state_dict(optim_state)
    return int(epoch) + 1


def run_epoch(model: nn.Module, opt: torch.optim.Optimizer, loader: DataLoader) -> None:
    lossf = nn.BCEWithLogitsLoss()
    for x, y in loader:
        opt.zero_grad()
        lossf(model(x), y).backward()
        opt.step()


def main() -> None:
    dist.init_process_group()
    net, opt = build()
    first = restore(net, opt)
    model = DDP(net)
    ds = data()
    sampler = DistributedSampler(ds, seed=4)
    loader = DataLoader(ds, batch_size=7, sampler=sampler)
    for epoch in range(first, 3):
        sampler.set_epoch(epoch)
        run_epoch(model, opt, loader)
        if dist.get_rank() == 0:
            torch.save((epoch, net.state_dict(), opt.state_dict()), SNAP)
        dist.barrier()
    dist.destroy_process_group()


main()
