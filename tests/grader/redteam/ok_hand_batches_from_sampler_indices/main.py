"""No DataLoader: batches cut by hand from the tensors, at the indices a DistributedSampler gives."""
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DistributedSampler


def main():
    cuda = torch.cuda.is_available()
    local = int(os.environ["LOCAL_RANK"])
    if cuda:
        torch.cuda.set_device(local)
    device = torch.device("cuda", local) if cuda else torch.device("cpu")
    dist.init_process_group("nccl" if cuda else "gloo")
    try:
        g = torch.Generator().manual_seed(0)
        X, Y = torch.randn(256, 10, generator=g), torch.randn(256, 1, generator=g)
        sampler = DistributedSampler(range(len(X)), shuffle=True, seed=1)
        model = DDP(nn.Linear(10, 1).to(device), device_ids=[local] if cuda else None)
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        for epoch in range(3):
            sampler.set_epoch(epoch)
            order = torch.tensor(list(sampler))
            for batch in order.split(16):
                x, y = X[batch].to(device), Y[batch].to(device)
                opt.zero_grad()
                nn.functional.mse_loss(model(x), y).backward()
                opt.step()
        if dist.get_rank() == 0:
            torch.save(model.module.state_dict(), "checkpoint.pt")
        dist.barrier()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
