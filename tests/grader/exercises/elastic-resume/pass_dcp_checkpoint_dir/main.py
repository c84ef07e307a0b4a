"""Correct: the snapshot is a torch.distributed.checkpoint directory. Every rank takes part in
dcp.save at the end of each epoch (a collective: each writes its part, rank 0 the metadata) and,
after a restart, in dcp.load from the same directory."""

import os

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

CKPT_DIR = "dcp_snapshot"
EPOCHS = 4


def main() -> None:
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 1))
    state = {"model": model.state_dict(), "epoch": torch.tensor(-1)}
    if os.path.exists(os.path.join(CKPT_DIR, ".metadata")):
        dcp.load(state, checkpoint_id=CKPT_DIR)  # in place: the tensors of `state`
        model.load_state_dict(state["model"])
    start = int(state["epoch"]) + 1
    ddp = DDP(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 10, generator=g)
    data = TensorDataset(x, x @ torch.randn(10, 1, generator=g))
    sampler = DistributedSampler(data, shuffle=True, seed=0)
    for epoch in range(start, EPOCHS):
        sampler.set_epoch(epoch)
        for xb, yb in DataLoader(data, batch_size=16, sampler=sampler):
            opt.zero_grad()
            nn.functional.mse_loss(ddp(xb), yb).backward()
            opt.step()
        dcp.save(
            {"model": ddp.module.state_dict(), "epoch": torch.tensor(epoch)}, checkpoint_id=CKPT_DIR
        )
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
