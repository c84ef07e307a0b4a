"""Fault-tolerant training: snapshot every epoch, resume from the snapshot after a restart.

Run: TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 torchrun --standalone --nproc-per-node 2 \
         --max-restarts 1 main.py
(the variable makes restarts reliable on PyTorch >= 2.4, on gloo and NCCL).
When a worker fails, torchrun stops every worker and starts them all again (up to
--max-restarts times). Right now a restarted job starts over from epoch 0 and loses
everything it had done. Implement the two snapshot functions (the TODOs).
"""

import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

EPOCHS = 4
BATCH_SIZE = 16  # per process
SNAPSHOT = "snapshot.pt"


def make_dataset() -> TensorDataset:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 10, generator=g)
    true_w = torch.randn(10, 1, generator=g)
    y = x @ true_w + 0.1 * torch.randn(64, 1, generator=g)
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


def save_snapshot(epoch: int, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
    """Called at the end of every epoch, on every rank."""
    # TODO: write everything a restarted job needs to continue exactly where this one is,
    # to SNAPSHOT, from one rank only. A crash can strike in the middle of a write: make
    # sure a torn file never replaces a good snapshot. Make the other ranks wait for it.


def load_snapshot(model: nn.Module, optimizer: torch.optim.Optimizer, device: torch.device) -> int:
    """Called once at start-up, on every rank; returns the epoch to start from."""
    # TODO: if SNAPSHOT exists, restore the model and the optimizer from it (on this
    # rank's device) and return the first epoch that has not been completed yet.
    return 0


def train(device: torch.device) -> None:
    rank = dist.get_rank()
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    start_epoch = load_snapshot(model, optimizer, device)
    print(f"rank {rank} attempt {restart}: starting at epoch {start_epoch}", flush=True)
    ddp_model = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)

    dataset = make_dataset()
    sampler = DistributedSampler(dataset, shuffle=True, seed=0)
    loader = DataLoader(dataset, batch_size=BATCH_SIZE, sampler=sampler)
    loss_fn = nn.MSELoss()

    for epoch in range(start_epoch, EPOCHS):
        sampler.set_epoch(epoch)  # the same order as an uninterrupted run
        total = 0.0
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            loss = loss_fn(ddp_model(x), y)
            loss.backward()
            optimizer.step()
            total += loss.item()
        print(f"rank {rank} epoch {epoch} loss {total / len(loader):.4f}", flush=True)
        save_snapshot(epoch, ddp_model.module, optimizer)


def main() -> None:
    device = setup()
    try:
        train(device)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
