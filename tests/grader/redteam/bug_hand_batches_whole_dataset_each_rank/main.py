"""No DataLoader: every rank cuts its batches from the same slice of one shared permutation."""
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    cuda = torch.cuda.is_available()
    local = int(os.environ["LOCAL_RANK"])
    if cuda:
        torch.cuda.set_device(local)
    device = torch.device("cuda", local) if cuda else torch.device("cpu")
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    try:
        g = torch.Generator().manual_seed(0)
        X, Y = torch.randn(240, 10, generator=g), torch.randn(240, 1, generator=g)
        model = DDP(nn.Linear(10, 1).to(device), device_ids=[local] if cuda else None)
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        per_rank = len(X) // world  # equal shards: every rank takes the same number of steps
        for epoch in range(3):
            perm = torch.randperm(len(X), generator=torch.Generator().manual_seed(100 + epoch))
            mine = perm[:per_rank]  # "my shard": the same first slice on every rank
            for start in range(0, per_rank, 20):
                idx = mine[start:start + 20]
                opt.zero_grad()
                loss = nn.functional.mse_loss(model(X[idx].to(device)), Y[idx].to(device))
                loss.backward()
                opt.step()
        if rank == 0:
            torch.save(model.module.state_dict(), "checkpoint.pt")
        dist.barrier()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
