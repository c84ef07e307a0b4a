"""Distributed evaluation, exact despite padding, on GPUs (NCCL) and CPUs (gloo).

Run it: torchrun --standalone --nproc-per-node 3 main.py (3 ranks: the padding shows)
"""

import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

TEST_SAMPLES = 1001  # not a multiple of 2 or 3: a DistributedSampler pads the shards
BATCH_SIZE = 64


def make_data(samples: int, seed: int) -> TensorDataset:
    # The same fixed seeds on every rank: every process builds the same data.
    rule = torch.randn(8, 4, generator=torch.Generator().manual_seed(0))
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(samples, 8, generator=g)
    y = (x @ rule + 0.8 * torch.randn(samples, 4, generator=g)).argmax(dim=1)
    return TensorDataset(x, y)


def trained_model() -> nn.Module:
    """Stands in for loading a checkpoint: the same short training on every rank."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 4))
    x, y = make_data(512, seed=1).tensors
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    for _ in range(100):
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
    return model.eval()


def evaluate(model: nn.Module, dataset: TensorDataset, device: torch.device) -> None:
    rank, world_size = dist.get_rank(), dist.get_world_size()
    # Rank r gets positions r, r + world_size, ... of the index list; without shuffling, the
    # padding (repeats of the first indices) fills the positions past the dataset's end, so it
    # is the tail of each rank's shard.
    sampler = DistributedSampler(dataset, shuffle=False)
    loader = DataLoader(dataset, batch_size=BATCH_SIZE, sampler=sampler)
    own = len(range(rank, len(dataset), world_size))  # this rank's real samples
    correct = total = 0
    with torch.no_grad():
        for x, y in loader:
            keep = max(0, min(len(y), own - total))  # drop the padded tail
            x, y = x[:keep].to(device), y[:keep].to(device)
            predicted = model(x).argmax(dim=1)
            correct += int((predicted == y).sum())
            total += keep
    # Sums and counts add up exactly; dividing only at the end gives the whole dataset's accuracy.
    # On the device: under NCCL a CPU tensor cannot be all-reduced.
    counts = torch.tensor([correct, total], dtype=torch.int64, device=device)
    dist.all_reduce(counts, op=dist.ReduceOp.SUM)
    if rank == 0:
        print(f"accuracy={counts[0].item() / counts[1].item()}", flush=True)


def setup() -> torch.device:
    """Join the process group and pick this process's device from the machine."""
    if torch.cuda.is_available():
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        torch.cuda.set_device(device)
        backend = "nccl"  # NCCL all-reduces CUDA tensors only
    else:
        device = torch.device("cpu")
        backend = "gloo"
    dist.init_process_group(backend=backend)
    return device


def main() -> None:
    device = setup()
    try:
        evaluate(trained_model().to(device), make_data(TEST_SAMPLES, seed=2), device)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
