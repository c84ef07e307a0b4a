"""Correct: DistributedSampler shards, each rank sends (index, correct) pairs to rank 0 with
gather_object; rank 0 drops the padded repeats by index and reports."""

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


def evaluate(model: nn.Module, dataset: TensorDataset) -> None:
    rank, world_size = dist.get_rank(), dist.get_world_size()
    sampler = DistributedSampler(dataset, shuffle=False)
    indices = list(sampler)
    loader = DataLoader(dataset, batch_size=BATCH_SIZE, sampler=sampler)
    results = []
    position = 0
    with torch.no_grad():
        for x, y in loader:
            correct = (model(x).argmax(dim=1) == y).tolist()
            results.extend(zip(indices[position : position + len(correct)], correct))
            position += len(correct)
    gathered: list[list[tuple[int, bool]]] | None = [[] for _ in range(world_size)] if rank == 0 else None
    dist.gather_object(results, gathered, dst=0)
    if rank == 0 and gathered is not None:
        by_index = {i: ok for part in gathered for i, ok in part}  # a padded repeat overwrites itself
        print(f"accuracy={sum(by_index.values()) / len(by_index)}")


def main() -> None:
    dist.init_process_group("gloo")
    try:
        evaluate(trained_model(), make_data(TEST_SAMPLES, seed=2))
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
