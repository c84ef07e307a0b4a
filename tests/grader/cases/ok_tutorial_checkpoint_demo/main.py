"""Correct: the checkpoint demo of the official DDP tutorial: rank 0 saves the initial weights,
a barrier, every rank loads them with map_location, then trains."""

import os
import tempfile

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.optim as optim
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


class ToyModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.net1 = nn.Linear(10, 10)
        self.relu = nn.ReLU()
        self.net2 = nn.Linear(10, 5)

    def forward(self, x):
        return self.net2(self.relu(self.net1(x)))


def demo_checkpoint(rank, world_size):
    print(f"Running DDP checkpoint example on rank {rank}.")
    model = ToyModel()
    ddp_model = DDP(model)

    CHECKPOINT_PATH = os.path.join(os.getcwd(), "model.checkpoint")
    if rank == 0:
        torch.save(ddp_model.module.state_dict(), CHECKPOINT_PATH)

    # Use a barrier() to make sure that process 1 loads the model after process 0 saves it.
    dist.barrier()
    map_location = {"cpu": "cpu"}
    ddp_model.module.load_state_dict(torch.load(CHECKPOINT_PATH, map_location=map_location, weights_only=True))

    loss_fn = nn.MSELoss()
    optimizer = optim.SGD(ddp_model.parameters(), lr=0.001)
    data = TensorDataset(torch.randn(64, 10), torch.randn(64, 5))
    sampler = DistributedSampler(data)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for x, y in DataLoader(data, batch_size=8, sampler=sampler):
            optimizer.zero_grad()
            loss_fn(ddp_model(x), y).backward()
            optimizer.step()

    dist.barrier()
    if rank == 0:
        os.remove(CHECKPOINT_PATH)


if __name__ == "__main__":
    dist.init_process_group("gloo")
    demo_checkpoint(dist.get_rank(), dist.get_world_size())
    dist.destroy_process_group()
