"""Bug: the gradients are averaged correctly (all_reduce SUM, then / world size), but nothing
clears them between updates: the first update is right, every later one adds up all the
earlier (already averaged) gradients with the new ones."""

import torch
import torch.distributed as dist
from torch import nn


def average_gradients(model: nn.Module) -> None:
    size = float(dist.get_world_size())
    for param in model.parameters():
        dist.all_reduce(param.grad.data, op=dist.ReduceOp.SUM)
        param.grad.data /= size


def main() -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(1234)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    for p in model.parameters():
        dist.broadcast(p.data, src=0)
    g = torch.Generator().manual_seed(7)
    data, target = torch.randn(120, 4, generator=g), torch.randint(0, 2, (120,), generator=g)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.5)
    shard = slice(rank * 120 // world, (rank + 1) * 120 // world)
    xs, ys = data[shard], target[shard]
    for epoch in range(3):
        for i in range(0, len(xs), 10):
            loss = nn.functional.cross_entropy(model(xs[i : i + 10]), ys[i : i + 10])
            loss.backward()
            average_gradients(model)
            optimizer.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
