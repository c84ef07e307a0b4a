"""Correct: a hand-made shard (a Subset of every world_size-th sample, no padding); every rank
gathers every rank's per-sample results with all_gather_object and rank 0 reports."""

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.utils.data import DataLoader, Subset, TensorDataset

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
    mine = list(range(rank, len(dataset), world_size))
    loader = DataLoader(Subset(dataset, mine), batch_size=BATCH_SIZE)
    hits: list[bool] = []
    with torch.inference_mode():
        for x, y in loader:
            hits.extend((model(x).argmax(dim=1) == y).tolist())
    every: list[list[bool] | None] = [None] * world_size
    dist.all_gather_object(every, hits)
    if rank == 0:
        flat = [h for part in every if part is not None for h in part]
        print(f"accuracy={sum(flat) / len(flat)}")


def main() -> None:
    dist.init_process_group("gloo")
    try:
        evaluate(trained_model(), make_data(TEST_SAMPLES, seed=2))
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
