import os
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def loader_for_epoch(ds, epoch):
    # a fresh sampler every epoch, told which epoch it is
    sampler = DistributedSampler(ds, shuffle=True, seed=0)
    sampler.set_epoch(epoch)
    return DataLoader(ds, batch_size=16, sampler=sampler)


def main():
    cuda = torch.cuda.is_available()
    local = int(os.environ["LOCAL_RANK"])
    if cuda:
        torch.cuda.set_device(local)
    dev = torch.device("cuda", local) if cuda else torch.device("cpu")
    dist.init_process_group("nccl" if cuda else "gloo")
    try:
        g = torch.Generator().manual_seed(9)
        ds = TensorDataset(torch.randn(160, 3, generator=g), torch.randn(160, 1, generator=g))
        model = DDP(nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 1)).to(dev),
                    device_ids=[local] if cuda else None)
        opt = torch.optim.Adagrad(model.parameters(), lr=0.05)
        for epoch in range(3):
            for x, y in loader_for_epoch(ds, epoch):
                opt.zero_grad()
                nn.functional.l1_loss(model(x.to(dev)), y.to(dev)).backward()
                opt.step()
        if dist.get_rank() == 0:
            torch.save(model.module.state_dict(), "model.pt")
        dist.barrier()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
