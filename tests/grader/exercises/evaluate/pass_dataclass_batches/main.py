"""Correct, no DataLoader: each rank cuts its own contiguous block of the test set into
dataclass batches and calls `model(batch)`; the model reads the batch's fields. Counts are summed
with all_reduce (the blocks do not overlap, so nothing is counted twice)."""

from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn


@dataclass
class Batch:
    pixels: torch.Tensor
    target: torch.Tensor


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(10, 5)

    def forward(self, batch: Batch) -> torch.Tensor:
        return self.proj(batch.pixels.flatten(1))


def test_set() -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(5)
    pixels = torch.rand(611, 2, 5, generator=gen)
    target = (pixels.sum(dim=(1, 2)) * 7).long() % 5
    return pixels, target


def main() -> None:
    dist.init_process_group(backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    net = Net()
    net.eval()
    pixels, target = test_set()
    n = len(target)
    lo, hi = rank * n // world, (rank + 1) * n // world  # contiguous, uneven, no padding
    correct = torch.zeros((), dtype=torch.long)
    with torch.no_grad():
        for start in range(lo, hi, 32):
            end = min(start + 32, hi)
            batch = Batch(pixels=pixels[start:end], target=target[start:end])
            correct += (net(batch).argmax(1) == batch.target).sum()
    dist.all_reduce(correct, op=dist.ReduceOp.SUM)
    if rank == 0:
        print(f"accuracy={correct.item() / n}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
