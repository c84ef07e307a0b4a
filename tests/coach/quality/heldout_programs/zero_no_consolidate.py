"""Shard the optimizer state with ZeroRedundancyOptimizer and save a complete checkpoint.

Run: torchrun --standalone --nproc-per-node 2 main.py
Right now every rank keeps a full copy of Adam's state. Shard it, then save a checkpoint
whose optimizer state is complete. Work through the TODOs.
"""

import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

EPOCHS = 2
BATCH_SIZE = 16  # per process
CHECKPOINT = "checkpoint.pt"


def make_dataset() -> TensorDataset:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(256, 10, generator=g)
    true_w = torch.randn(10, 1, generator=g)
    y = x @ true_w + 0.1 * torch.randn(256, 1, generator=g)
    return TensorDataset(x, y)


def setup() -> torch.device:
    if torch.cuda.is_available():
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        torch.cuda.set_device(device)
        backend = "nccl"
    else:
        device = torch.device("cpu")
        backend = "gloo"
    dist.init_process_group(backend=backend)
    return device


def train(device: torch.device) -> None:
    rank = dist.get_rank()

    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(10, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1)
    ).to(device)
    ddp_model = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)

    # TODO: shard the optimizer state: each rank should keep Adam's moments only for
    # its own share of the parameters (same optimizer class, same learning rate).
    optimizer = ZeroRedundancyOptimizer(
        ddp_model.parameters(), optimizer_class=torch.optim.Adam, lr=1e-2
    )

    dataset = make_dataset()
    sampler = DistributedSampler(dataset, shuffle=True, seed=0)
    loader = DataLoader(dataset, batch_size=BATCH_SIZE, sampler=sampler)
    loss_fn = nn.MSELoss()

    for epoch in range(EPOCHS):
        sampler.set_epoch(epoch)
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            loss = loss_fn(ddp_model(x), y)
            loss.backward()
            optimizer.step()
        print(f"rank {rank} epoch {epoch} loss {loss.item():.4f}", flush=True)

    # TODO: with a sharded optimizer, rank 0 only holds its own shard. Gather the whole
    # optimizer state on rank 0 first (think about which ranks must take part).
    if rank == 0:
        checkpoint = {
            "epoch": EPOCHS - 1,
            "model": ddp_model.module.state_dict(),
            "optimizer": optimizer.state_dict(),
        }
        torch.save(checkpoint, CHECKPOINT)
    dist.barrier()

    # Every rank loads the checkpoint back, as a resumed job would.
    checkpoint = torch.load(CHECKPOINT, map_location=device)
    ddp_model.module.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    print(f"rank {rank} reloaded the checkpoint of epoch {checkpoint['epoch']}", flush=True)


def main() -> None:
    device = setup()
    try:
        train(device)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
