"""ZeRO-1 as a class, in the style of CS336 assignment 2: ShardedOptimizer(params, Adam, lr=...)
is itself a torch.optim.Optimizer; parameters go to ranks round-robin, and after the local step
every parameter is broadcast from its owner with async collectives."""

from typing import Any

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


class ShardedOptimizer(torch.optim.Optimizer):
    def __init__(self, params: Any, optimizer_cls: type, **kwargs: Any) -> None:
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.all_params: list[torch.Tensor] = []
        self.local: torch.optim.Optimizer | None = None
        self.optimizer_cls, self.kwargs = optimizer_cls, kwargs
        super().__init__(params, kwargs)

    def add_param_group(self, group: dict[str, Any]) -> None:
        super().add_param_group(group)
        start = len(self.all_params)
        self.all_params += group["params"]
        mine = [p for i, p in enumerate(group["params"]) if (start + i) % self.world == self.rank]
        if self.local is None:
            self.local = self.optimizer_cls(mine, **self.kwargs)
        else:
            self.local.add_param_group({**group, "params": mine})

    @torch.no_grad()
    def step(self, closure: Any = None) -> None:
        assert self.local is not None
        self.local.step()
        works = [
            dist.broadcast(p, src=i % self.world, async_op=True)
            for i, p in enumerate(self.all_params)
        ]
        for work in works:
            work.wait()


def main() -> None:
    dist.init_process_group("gloo")
    try:
        torch.manual_seed(0)
        net = nn.Sequential(
            nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(),
            nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 1),
        )
        model = DDP(net)
        opt = ShardedOptimizer(model.parameters(), torch.optim.Adam, lr=1e-2, betas=(0.8, 0.99))
        g = torch.Generator().manual_seed(dist.get_rank())
        for _ in range(12):
            x = torch.randn(8, 16, generator=g)
            opt.zero_grad(set_to_none=True)
            loss = (model(x) - x.sum(1, keepdim=True)).pow(2).mean()
            loss.backward()
            opt.step()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
