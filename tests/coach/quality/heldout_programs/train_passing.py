"""DDP training, the device-agnostic way. Run: torchrun --standalone --nproc-per-node 2 main.py"""

import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

EPOCHS = 3
BATCH_SIZE = 16  # per process
CHECKPOINT = "checkpoint.pt"


def make_dataset() -> TensorDataset:
    # The same fixed seed on every rank: every process builds the same data.
    g = torch.Generator().manual_seed(0)
    x = torch.randn(256, 10, generator=g)
    true_w = torch.randn(10, 1, generator=g)
    y = x @ true_w + 0.1 * torch.randn(256, 1, generator=g)
    return TensorDataset(x, y)


def setup() -> torch.device:
    """Join the process group and pick this process's device."""
    if torch.cuda.is_available():
        local_rank = int(os.environ["LOCAL_RANK"])
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)  # pin this process to its own GPU
        backend = "nccl"
    else:
        device = torch.device("cpu")
        backend = "gloo"
    # torchrun exported RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT: env:// reads them.
    dist.init_process_group(backend=backend)
    return device


def train(device: torch.device) -> None:
    rank = dist.get_rank()

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1)).to(device)
    # DDP broadcasts rank 0's weights at construction and averages gradients in backward.
    ddp_model = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)

    dataset = make_dataset()
    sampler = DistributedSampler(dataset, shuffle=True, seed=0)  # a distinct shard per rank
    loader = DataLoader(dataset, batch_size=BATCH_SIZE, sampler=sampler)

    optimizer = torch.optim.SGD(ddp_model.parameters(), lr=0.05)
    loss_fn = nn.MSELoss()

    for epoch in range(EPOCHS):
        sampler.set_epoch(epoch)  # a new shuffle every epoch, the same on every rank
        total = 0.0
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            loss = loss_fn(ddp_model(x), y)
            loss.backward()  # gradients are all-reduced (averaged) here
            optimizer.step()
            total += loss.item()
        print(f"rank {rank} epoch {epoch} loss {total / len(loader):.4f}", flush=True)

        if rank == 0:
            # Save the inner module: its keys have no "module." prefix.
            torch.save(ddp_model.module.state_dict(), CHECKPOINT)
        dist.barrier()  # nobody moves on (or reads the file) before rank 0 has written it


def main() -> None:
    device = setup()
    try:
        train(device)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
