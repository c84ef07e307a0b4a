"""Long epochs (20 steps per rank), snapshot every epoch, but the optimizer state is not saved:
Adam's moments start from zero after the restart, so the run ends elsewhere."""

import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main() -> None:
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    net = nn.Linear(8, 2)
    opt = torch.optim.Adam(net.parameters(), lr=0.01)
    start = 0
    if os.path.exists("model_epoch.pt"):
        blob = torch.load("model_epoch.pt")
        net.load_state_dict(blob["model"])
        start = blob["epoch"] + 1
    model = DDP(net)
    g = torch.Generator().manual_seed(0)
    ds = TensorDataset(torch.randn(160, 8, generator=g), torch.randint(0, 2, (160,), generator=g))
    sampler = DistributedSampler(ds)
    loader = DataLoader(ds, batch_size=4, sampler=sampler)
    for epoch in range(start, 3):
        sampler.set_epoch(epoch)
        for x, y in loader:
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
        if dist.get_rank() == 0:
            torch.save({"model": net.state_dict(), "epoch": epoch}, "model_epoch.pt")
        dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
