"""Consolidates at the START of every epoch and saves at the END: the saved optimizer state is
the one from before the epoch's steps (stale step counts and moments)."""

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main() -> None:
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1)))
    opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.AdamW, lr=5e-3)
    g = torch.Generator().manual_seed(0)
    ds = TensorDataset(torch.randn(64, 4, generator=g), torch.randn(64, 1, generator=g))
    sampler = DistributedSampler(ds)
    loader = DataLoader(ds, batch_size=8, sampler=sampler)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        opt.consolidate_state_dict(to=0)
        for x, y in loader:
            opt.zero_grad()
            nn.functional.mse_loss(model(x), y).backward()
            opt.step()
        if dist.get_rank() == 0:
            torch.save({"epoch": epoch, "optimizer": opt.state_dict(),
                        "model": model.module.state_dict()}, f"epoch-{epoch}.ckpt")
        dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
