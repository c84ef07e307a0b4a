"""Shard the optimizer state by hand (ZeRO stage 1).

Run: torchrun --standalone --nproc-per-node 2 main.py
Right now every rank keeps Adam's moments for every parameter. Give each rank a share of the
parameters: it keeps the optimizer state of its share only, steps it, and the updated values
must reach every rank. Work through the TODOs.
"""

import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

EPOCHS = 2
BATCH_SIZE = 16  # per process


def make_dataset() -> TensorDataset:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(256, 16, generator=g)
    true_w = torch.randn(16, 1, generator=g)
    y = x @ true_w + 0.1 * torch.randn(256, 1, generator=g)
    return TensorDataset(x, y)


def make_model() -> nn.Module:
    return nn.Sequential(
        nn.Linear(16, 32),
        nn.ReLU(),
        nn.Linear(32, 32),
        nn.ReLU(),
        nn.Linear(32, 32),
        nn.ReLU(),
        nn.Linear(32, 32),
        nn.ReLU(),
        nn.Linear(32, 1),
    )


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
    model = make_model().to(device)
    ddp_model = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)

    # TODO: give each parameter an owner rank, and keep Adam's state only for the
    # parameters this rank owns (same optimizer class, same learning rate).
    optimizer = torch.optim.Adam(ddp_model.parameters(), lr=1e-2)

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
            # TODO: once each rank steps only its own share, send the updated parameters
            # to every rank so that all replicas stay equal.
        print(f"rank {rank} epoch {epoch} loss {loss.item():.4f}", flush=True)


def main() -> None:
    device = setup()
    try:
        train(device)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
