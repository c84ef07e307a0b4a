"""Correct, torchelastic style: rank 0 alone writes the snapshot file (through a file object it
opened), but every rank serialises its model state into an io.BytesIO to compare the ranks'
bytes after every epoch (they must be identical under DDP). A buffer in memory is no checkpoint."""

import io
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

SNAPSHOT = "snapshot.bin"


def state_bytes(model: nn.Module) -> torch.Tensor:
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    return torch.frombuffer(bytearray(buffer.getvalue()), dtype=torch.uint8)


def main() -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(192, 6), torch.randn(192, 2))
    sampler = DistributedSampler(data, shuffle=True, seed=4)
    loader = DataLoader(data, batch_size=16, sampler=sampler)
    net = DistributedDataParallel(nn.Sequential(nn.Linear(6, 12), nn.GELU(), nn.Linear(12, 2)))
    opt = torch.optim.AdamW(net.parameters(), lr=3e-3)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for x, y in loader:
            opt.zero_grad(set_to_none=True)
            nn.functional.smooth_l1_loss(net(x), y).backward()
            opt.step()
        mine = state_bytes(net.module)
        theirs = mine.clone()
        dist.broadcast(theirs, src=0)
        assert torch.equal(mine, theirs), "the replicas diverged"
        if rank == 0:
            with open(SNAPSHOT, "wb") as f:
                torch.save({"model": net.module.state_dict(), "epoch": epoch}, f)
        dist.barrier()
    restored = torch.load(SNAPSHOT)
    net.module.load_state_dict(restored["model"])
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
