"""torchrun-ready in every other way (RANK, WORLD_SIZE and LOCAL_RANK from the environment), but
every process writes the checkpoint: no rank guard at all, so even one node has two writers."""

import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main() -> None:
    local_rank = int(os.environ["LOCAL_RANK"])
    dist.init_process_group("gloo", rank=int(os.environ["RANK"]),
                            world_size=int(os.environ["WORLD_SIZE"]))
    torch.manual_seed(0)
    model = DDP(nn.Linear(4, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(0)
    ds = TensorDataset(torch.randn(32, 4, generator=g), torch.randn(32, 1, generator=g))
    sampler = DistributedSampler(ds)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for x, y in DataLoader(ds, batch_size=8, sampler=sampler):
            opt.zero_grad()
            nn.functional.mse_loss(model(x), y).backward()
            opt.step()
    print(f"local rank {local_rank} saving", flush=True)
    torch.save(model.module.state_dict(), "weights.pt")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
