"""Correct, torchelastic style: rank 0 alone writes the snapshot file at the end of every epoch
and every rank resumes from it. Halfway through every epoch, every rank serialises its model
state into an io.BytesIO and rank 0 broadcasts its bytes, so each rank can check that its replica
matches rank 0's. Buffers in memory are not checkpoint writes (nor the snapshot a fault follows)."""

import io
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

SNAPSHOT = "train_state.pt"
EPOCHS = 4


def to_bytes(obj: object) -> bytes:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def matches_rank0(model: nn.Module) -> bool:
    """Every rank serialises its state; rank 0's bytes are broadcast and compared."""
    mine = to_bytes(model.state_dict())
    payload = [mine]
    dist.broadcast_object_list(payload, src=0)
    return payload[0] == mine


def main() -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 24), nn.Tanh(), nn.Linear(24, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    start = 0
    if os.path.exists(SNAPSHOT):
        state = torch.load(SNAPSHOT)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        start = state["epoch"] + 1
    ddp = DDP(model)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 10, generator=g)
    data = TensorDataset(x, x @ torch.randn(10, 1, generator=g))
    sampler = DistributedSampler(data, shuffle=True, seed=0)
    for epoch in range(start, EPOCHS):
        sampler.set_epoch(epoch)
        for i, (xb, yb) in enumerate(DataLoader(data, batch_size=16, sampler=sampler)):
            opt.zero_grad()
            nn.functional.mse_loss(ddp(xb), yb).backward()
            opt.step()
            if i == 0:
                assert matches_rank0(ddp.module), "the replicas diverged"
        if rank == 0:
            state = {"epoch": epoch, "model": ddp.module.state_dict(), "optimizer": opt.state_dict()}
            torch.save(state, SNAPSHOT + ".part")
            os.replace(SNAPSHOT + ".part", SNAPSHOT)
        dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
