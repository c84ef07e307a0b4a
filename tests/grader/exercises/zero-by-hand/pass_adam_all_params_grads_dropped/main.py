"""Adam is built over every parameter, but each rank drops the gradients of the parameters it
does not own before stepping: Adam creates state lazily, only for parameters with a gradient,
so each rank keeps the moments of its own share. Owners by name, balanced by size."""

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(16, 32)
        self.hidden = nn.ModuleList(nn.Linear(32, 32) for _ in range(3))
        self.out = nn.Linear(32, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.inp(x))
        for layer in self.hidden:
            x = torch.relu(layer(x))
        return self.out(x)


def owners_by_size(model: nn.Module, world: int) -> dict[str, int]:
    load = [0] * world
    owner: dict[str, int] = {}
    for name, p in sorted(model.named_parameters(), key=lambda kv: (-kv[1].numel(), kv[0])):
        r = load.index(min(load))
        owner[name] = r
        load[r] += p.numel()
    return owner


def main() -> None:
    dist.init_process_group(backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DDP(Net())
    owner = owners_by_size(model.module, world)
    named = list(model.module.named_parameters())
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(100 + rank)
    w_true = torch.randn(16, 1, generator=torch.Generator().manual_seed(0))
    for _ in range(10):
        x = torch.randn(16, 16, generator=g)
        model.zero_grad(set_to_none=True)
        loss = nn.functional.mse_loss(model(x), x @ w_true)
        loss.backward()
        for name, p in named:
            if owner[name] != rank:
                p.grad = None  # not ours: Adam skips it and keeps no state for it
        opt.step()
        with torch.no_grad():
            for name, p in named:
                dist.broadcast(p.data, src=owner[name])
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
