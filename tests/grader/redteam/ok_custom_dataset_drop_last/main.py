import math
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler


class Waves(Dataset):
    """A map-style dataset that computes each sample from its index (no tensors stored)."""

    def __init__(self, n: int = 250):
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        t = torch.linspace(0, 1, 16) + i / self.n
        x = torch.sin(2 * math.pi * t * (1 + i % 5))
        y = torch.tensor([float(i % 5)])
        return x, y


def main():
    if torch.cuda.is_available():
        dev = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        torch.cuda.set_device(dev)
        dist.init_process_group("nccl")
    else:
        dev = torch.device("cpu")
        dist.init_process_group("gloo")
    try:
        ds = Waves()
        sampler = DistributedSampler(ds, shuffle=True)
        # 125 samples per rank, batch 24: the last partial batch (5 samples) is dropped
        loader = DataLoader(ds, batch_size=24, sampler=sampler, drop_last=True, num_workers=0)
        torch.manual_seed(3)
        model = nn.Sequential(nn.Linear(16, 32), nn.SiLU(), nn.Linear(32, 1)).to(dev)
        ddp = DDP(model, device_ids=[dev.index] if dev.type == "cuda" else None)
        opt = torch.optim.RMSprop(ddp.parameters(), lr=1e-3)
        for epoch in range(3):
            sampler.set_epoch(epoch)
            for x, y in loader:
                opt.zero_grad()
                loss = nn.functional.smooth_l1_loss(ddp(x.to(dev)), y.to(dev))
                loss.backward()
                opt.step()
            if dist.get_rank() == 0:
                print(f"epoch {epoch}: last loss {loss.item():.4f}")
        if dist.get_rank() == 0:
            torch.save(ddp.module.state_dict(), "waves.pt")
        dist.barrier()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
