"""BatchNorm statistics across ranks with SyncBatchNorm, converted before the DDP wrap.

Run: torchrun --standalone --nproc-per-node 2 main.py
Right now build_model returns a plain model: no DDP and per-rank BatchNorm statistics.
Finish build_model (the TODOs). In this course you convert on every device (the grading
convention; real code converts when it trains on GPUs, often behind a flag): PyTorch runs
SyncBatchNorm on GPUs only, and Rendezvous's CPU workers run it as per-rank BatchNorm so your
program is graded there.
"""

import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

EPOCHS = 2
BATCH_SIZE = 8  # per process: small per-rank batches are where SyncBatchNorm matters


def make_dataset() -> TensorDataset:
    g = torch.Generator().manual_seed(0)
    x = 2.0 + torch.randn(256, 10, generator=g)
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


def build_model(device: torch.device) -> nn.Module:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 1))
    # TODO: replace every BatchNorm layer by SyncBatchNorm (on every device, not only on GPUs).
    model = model.to(device)
    ddp_model = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
    ddp_model.module = nn.SyncBatchNorm.convert_sync_batchnorm(ddp_model.module)
    return ddp_model


def train(device: torch.device) -> None:
    rank = dist.get_rank()
    ddp_model = build_model(device)

    dataset = make_dataset()
    sampler = DistributedSampler(dataset, shuffle=True, seed=0)
    loader = DataLoader(dataset, batch_size=BATCH_SIZE, sampler=sampler)
    optimizer = torch.optim.SGD(ddp_model.parameters(), lr=0.02)
    loss_fn = nn.MSELoss()

    ddp_model.train()
    for epoch in range(EPOCHS):
        sampler.set_epoch(epoch)
        total = 0.0
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            loss = loss_fn(ddp_model(x), y)
            loss.backward()
            optimizer.step()
            total += loss.item()
        print(f"rank {rank} epoch {epoch} loss {total / len(loader):.4f}", flush=True)

    bn = ddp_model.module[1] if isinstance(ddp_model, DDP) else ddp_model[1]
    print(f"rank {rank} {type(bn).__name__} running_mean[:3] {bn.running_mean[:3].tolist()}")


def main() -> None:
    device = setup()
    try:
        train(device)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
