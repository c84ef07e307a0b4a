"""Evaluate a trained model with every rank working on its own shard of the test set.

Run it: torchrun --standalone --nproc-per-node 3 main.py (3 ranks: the padding shows)
Right now every process evaluates the whole test set and every process prints the accuracy.
Make each rank evaluate only its shard and rank 0 alone print `accuracy=<value>`, exactly the
accuracy one process computes over the whole test set.
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
    # TODO: give each rank its own shard (a DistributedSampler with shuffle=False, say).
    sampler = DistributedSampler(dataset, shuffle=False)
    loader = DataLoader(dataset, batch_size=BATCH_SIZE, sampler=sampler)
    correct = total = 0
    with torch.no_grad():
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            predicted = model(x).argmax(dim=1)
            # TODO: leave out the samples the sampler repeated to pad the last shard.
            correct += int((predicted == y).sum())
            total += len(y)
    # TODO: combine every rank's counts (in a tensor on `device`: NCCL all-reduces CUDA tensors
    # only), then only rank 0 prints the accuracy.
    acc = torch.tensor([correct / total], device=device)
    dist.all_reduce(acc)
    acc /= dist.get_world_size()
    if dist.get_rank() == 0:
        print(f"accuracy={acc.item()}", flush=True)


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
