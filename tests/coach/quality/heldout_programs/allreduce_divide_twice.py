"""Data parallelism by hand: shard the data, average gradients with all_reduce, no DDP.

Run: torchrun --standalone --nproc-per-node 2 main.py
Right now each rank trains on its own shard and never talks to the others, so the
replicas drift apart. Fill in the two TODO functions.
"""

import os

import torch
import torch.distributed as dist
import torch.nn as nn

EPOCHS = 2
BATCH_SIZE = 8  # per process
NUM_SAMPLES = 240


def make_dataset() -> tuple[torch.Tensor, torch.Tensor]:
    # The same fixed seed on every rank: every process builds the same data.
    g = torch.Generator().manual_seed(0)
    x = torch.randn(NUM_SAMPLES, 10, generator=g)
    true_w = torch.randn(10, 1, generator=g)
    y = x @ true_w + 0.1 * torch.randn(NUM_SAMPLES, 1, generator=g)
    return x, y


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


def shard_indices(epoch: int, rank: int, world_size: int) -> torch.Tensor:
    """Every rank draws the same permutation, then keeps every world_size-th index."""
    g = torch.Generator().manual_seed(epoch)
    order = torch.randperm(NUM_SAMPLES, generator=g)
    return order[rank::world_size]


def broadcast_parameters(model: nn.Module) -> None:
    """Start every replica from rank 0's weights."""
    for p in model.parameters():
        dist.broadcast(p.data, src=0)
    # TODO: copy rank 0's value of every parameter to all the other ranks.


def average_gradients(model: nn.Module) -> None:
    """Replace each local gradient by the mean of that gradient over all ranks."""
    world_size = dist.get_world_size()
    for p in model.parameters():
        dist.all_reduce(p.grad)
        p.grad /= world_size
    # TODO: for every parameter, sum its gradient over all ranks in place with one
    # collective, then turn the sum into a mean. (A parameter with no gradient on this rank
    # gets zeros first, so that every rank makes the same calls.)


def in_sync(model: nn.Module) -> bool:
    """True when this rank's weights equal rank 0's, bit for bit."""
    mine = torch.cat([p.detach().flatten() for p in model.parameters()])
    theirs = mine.clone()
    dist.broadcast(theirs, src=0)
    return torch.equal(mine, theirs)


def train(device: torch.device) -> None:
    rank, world_size = dist.get_rank(), dist.get_world_size()
    x, y = make_dataset()

    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1)).to(device)
    broadcast_parameters(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    loss_fn = nn.MSELoss()

    for epoch in range(EPOCHS):
        mine = shard_indices(epoch, rank, world_size)
        for start in range(0, len(mine), BATCH_SIZE):
            idx = mine[start : start + BATCH_SIZE]
            xb, yb = x[idx].to(device), y[idx].to(device)
            optimizer.zero_grad()
            loss = loss_fn(model(xb), yb) / world_size
            loss.backward()
            average_gradients(model)  # now every rank holds the same averaged gradient
            optimizer.step()
        print(f"rank {rank} epoch {epoch} last loss {loss.item():.4f}", flush=True)

    synced = in_sync(model)
    print(f"rank {rank} weights equal rank 0's: {synced}", flush=True)


def main() -> None:
    device = setup()
    try:
        train(device)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
