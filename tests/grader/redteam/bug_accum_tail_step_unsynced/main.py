import os
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def setup():
    cuda = torch.cuda.is_available()
    local = int(os.environ["LOCAL_RANK"])
    if cuda:
        torch.cuda.set_device(local)
    dist.init_process_group("nccl" if cuda else "gloo")
    return torch.device("cuda", local) if cuda else torch.device("cpu")


def data():
    g = torch.Generator().manual_seed(0)
    return TensorDataset(torch.randn(256, 10, generator=g), torch.randn(256, 1, generator=g))
import contextlib

ACCUM = 3


def main():
    device = setup()
    try:
        ds = data()
        sampler = DistributedSampler(ds)
        loader = DataLoader(ds, batch_size=16, sampler=sampler)  # 8 batches per rank
        torch.manual_seed(0)
        model = DDP(nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 1)).to(device),
                    device_ids=[device.index] if device.type == "cuda" else None)
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        for epoch in range(2):
            sampler.set_epoch(epoch)
            for i, (x, y) in enumerate(loader):
                sync_now = (i + 1) % ACCUM == 0
                with contextlib.nullcontext() if sync_now else model.no_sync():
                    (nn.functional.mse_loss(model(x.to(device)), y.to(device)) / ACCUM).backward()
                # also step on the leftover micro-batches at the end of the epoch...
                # ...but those were accumulated under no_sync: never all-reduced
                if sync_now or i == len(loader) - 1:
                    opt.step()
                    opt.zero_grad()
        if dist.get_rank() == 0:
            torch.save(model.module.state_dict(), "checkpoint.pt")
        dist.barrier()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
