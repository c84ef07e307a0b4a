"""Make this trainer torchrun-ready.

It was written to run as ONE process: it hard-codes its rank, the world size and the
address of the rendezvous. Under torchrun it fails even with `--nproc-per-node 1`: since
PyTorch 2.4 torchrun's rendezvous runs the group's store at MASTER_ADDR:MASTER_PORT and every
worker only connects to it, so a worker sent to tcp://127.0.0.1:29512, where nothing listens,
waits until its timeout ("client socket has timed out ... connect to (127.0.0.1, 29512)").
With 2 processes, or 2 machines, the fixed rank and world size are wrong too. Work through
the TODOs.

Run on one machine:  torchrun --standalone --nproc-per-node 2 main.py
Run on two machines: torchrun --nnodes 2 --nproc-per-node 2 --rdzv-backend c10d \
                         --rdzv-endpoint HOST:29400 --rdzv-id my-job main.py   (on each machine)
"""

import os
import socket

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

EPOCHS = 2
BATCH_SIZE = 16  # per process
CHECKPOINT = "checkpoint.pt"


def make_dataset() -> TensorDataset:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(192, 10, generator=g)
    true_w = torch.randn(10, 1, generator=g)
    y = x @ true_w + 0.1 * torch.randn(192, 1, generator=g)
    return TensorDataset(x, y)


def setup() -> tuple[int, int, int, torch.device]:
    # TODO: torchrun tells every worker who it is through environment variables.
    # Read this worker's global rank, its rank on this node and the world size from there.
    rank = int(os.environ["RANK"])
    local_rank = int(os.environ["LOCAL_RANK"])
    world_size = int(os.environ["WORLD_SIZE"])

    if torch.cuda.is_available():
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        backend = "nccl"
    else:
        device = torch.device("cpu")
        backend = "gloo"
    # TODO: torchrun has already exported the store's address and this worker's rank:
    # join the group with the default env:// init and drop the hard-coded values.
    dist.init_process_group(backend=backend)
    node = os.environ.get("GROUP_RANK", "?")
    print(
        f"rank {rank}/{world_size} local_rank {local_rank} node {node} "
        f"on {socket.gethostname()} ({device})",
        flush=True,
    )
    return rank, local_rank, world_size, device


def train(rank: int, local_rank: int, device: torch.device) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1)).to(device)
    ddp_model = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)

    dataset = make_dataset()
    sampler = DistributedSampler(dataset, shuffle=True, seed=0)  # uses the group's rank/size
    loader = DataLoader(dataset, batch_size=BATCH_SIZE, sampler=sampler)
    optimizer = torch.optim.SGD(ddp_model.parameters(), lr=0.05)
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

    # TODO: on two machines, how many workers pass this test? Exactly one should save.
    if local_rank == 0:
        torch.save(ddp_model.module.state_dict(), CHECKPOINT)
    dist.barrier()


def main() -> None:
    rank, local_rank, _, device = setup()
    try:
        train(rank, local_rank, device)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
