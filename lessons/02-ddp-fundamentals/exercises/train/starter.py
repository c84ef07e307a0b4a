"""Turn this single-process trainer into a DDP trainer.

Run it: torchrun --standalone --nproc-per-node 2 main.py
Right now every process trains alone on the whole dataset and every process writes
the checkpoint. Work through the TODOs, top to bottom.
"""

import os  # noqa: F401  (you will need it for LOCAL_RANK)

import torch
import torch.distributed as dist  # noqa: F401
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: F401
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset  # noqa: F401

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
    # TODO: pick the backend and the device without hard-coding either:
    #   - with CUDA: backend "nccl", device cuda:LOCAL_RANK, and pin the process to it
    #   - without:   backend "gloo", device cpu
    # TODO: join the process group (torchrun has already set the environment it needs).
    return torch.device("cpu")


def train(device: torch.device) -> None:
    rank = 0  # TODO: ask the process group which rank this process is

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1)).to(device)
    # TODO: wrap the model in DistributedDataParallel (device_ids only on GPU).

    dataset = make_dataset()
    # TODO: give each rank its own shard of the data with a DistributedSampler.
    loader = DataLoader(dataset, batch_size=BATCH_SIZE, shuffle=True)

    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    loss_fn = nn.MSELoss()

    for epoch in range(EPOCHS):
        # TODO: tell the sampler which epoch this is, so the shuffle changes every epoch.
        total = 0.0
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            total += loss.item()
        print(f"rank {rank} epoch {epoch} loss {total / len(loader):.4f}", flush=True)

        # TODO: only rank 0 should write the checkpoint, and it should save the
        # unwrapped model's state_dict; then make every rank wait until it is written.
        torch.save(model.state_dict(), CHECKPOINT)


def main() -> None:
    device = setup()
    train(device)
    # TODO: leave the process group cleanly, even when training raises.


if __name__ == "__main__":
    main()
