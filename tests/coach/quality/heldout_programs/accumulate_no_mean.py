"""Make this DDP trainer accumulate gradients over ACCUM_STEPS micro-batches.

Run it: torchrun --standalone --nproc-per-node 2 main.py
Right now it takes an optimizer step after every micro-batch. Make every optimizer step use the
mean gradient of ACCUM_STEPS micro-batches (of every rank), with one gradient all-reduce per step.
"""

import contextlib
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

EPOCHS = 2
MICRO_BATCH = 8  # samples per rank per micro-batch
ACCUM_STEPS = 4  # micro-batches per optimizer step


def make_dataset() -> TensorDataset:
    # The same fixed seed on every rank: every process builds the same data.
    g = torch.Generator().manual_seed(0)
    x = torch.randn(256, 10, generator=g)
    true_w = torch.randn(10, 1, generator=g)
    y = x @ true_w + 0.1 * torch.randn(256, 1, generator=g)
    return TensorDataset(x, y)


def setup() -> torch.device:
    if torch.cuda.is_available():
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        torch.cuda.set_device(device)
        dist.init_process_group("nccl")
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo")
    return device


def train(device: torch.device) -> None:
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1)).to(device)
    ddp_model = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)

    dataset = make_dataset()
    sampler = DistributedSampler(dataset, shuffle=True, seed=0)
    loader = DataLoader(dataset, batch_size=MICRO_BATCH, sampler=sampler)
    optimizer = torch.optim.SGD(ddp_model.parameters(), lr=0.05)
    loss_fn = nn.MSELoss()

    for epoch in range(EPOCHS):
        sampler.set_epoch(epoch)
        for i, (x, y) in enumerate(loader):
            x, y = x.to(device), y.to(device)
            last = (i + 1) % ACCUM_STEPS == 0
            ctx = contextlib.nullcontext() if last else ddp_model.no_sync()
            with ctx:
                loss = loss_fn(ddp_model(x), y)
                loss.backward()
            if last:
                optimizer.step()
                optimizer.zero_grad()
        print(f"rank {rank} epoch {epoch} loss {loss.item():.4f}", flush=True)


def main() -> None:
    device = setup()
    try:
        train(device)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
