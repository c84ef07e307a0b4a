"""torch.compile before DDP (nanoGPT's order) and a checkpoint of the compiled module's state_dict:
its keys start with '_orig_mod.', so a plain model cannot load it."""

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main() -> None:
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = torch.compile(nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 1)))
    ddp = DDP(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(0)
    ds = TensorDataset(torch.randn(64, 6, generator=g), torch.randn(64, 1, generator=g))
    sampler = DistributedSampler(ds)
    loader = DataLoader(ds, batch_size=16, sampler=sampler)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for x, y in loader:
            opt.zero_grad()
            nn.functional.mse_loss(ddp(x), y).backward()
            opt.step()
    if dist.get_rank() == 0:
        torch.save({"model": ddp.module.state_dict(), "epochs": 2}, "compiled.pt")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
