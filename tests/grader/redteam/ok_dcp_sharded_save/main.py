"""Correct: the checkpoint is a torch.distributed.checkpoint (DCP) save, a collective that every
rank calls (each writes its part of the one checkpoint directory); the bare model's state."""

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main() -> None:
    dist.init_process_group("gloo")
    torch.manual_seed(2)
    data = TensorDataset(torch.randn(96, 4), torch.randn(96, 1))
    sampler = DistributedSampler(data)
    model = DDP(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.02)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for x, y in DataLoader(data, batch_size=12, sampler=sampler):
            opt.zero_grad()
            nn.functional.mse_loss(model(x), y).backward()
            opt.step()
    dcp.save({"model": model.module.state_dict()}, checkpoint_id="ckpt_dcp")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
