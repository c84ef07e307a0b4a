"""Builds a ZeroRedundancyOptimizer, but the training loop steps a plain Adam created next to it:
the ZeRO optimizer never steps, so the state it consolidates and saves holds nothing."""

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP


def main() -> None:
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(6, 32), nn.ReLU(), nn.Linear(32, 1)))
    zero = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.Adam, lr=1e-2)
    optimizers = {"zero": zero, "adam": torch.optim.Adam(model.parameters(), lr=1e-2)}
    opt = optimizers["adam"]
    g = torch.Generator().manual_seed(dist.get_rank())
    for _ in range(6):
        x, y = torch.randn(8, 6, generator=g), torch.randn(8, 1, generator=g)
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    zero.consolidate_state_dict(to=0)
    if dist.get_rank() == 0:
        torch.save({"model": model.module.state_dict(), "optim": zero.state_dict()}, "state.pt")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
