import os
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

N = 251  # odd on purpose: the sampler drops the tail instead of padding


def setup():
    if torch.cuda.is_available():
        lr_ = int(os.environ["LOCAL_RANK"])
        torch.cuda.set_device(lr_)
        dist.init_process_group("nccl")
        return torch.device("cuda", lr_)
    dist.init_process_group("gloo")
    return torch.device("cpu")


def main():
    device = setup()
    try:
        g = torch.Generator().manual_seed(1)
        x = torch.randn(N, 4, generator=g)
        y = x @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]])
        ds = TensorDataset(x, y)
        sampler = DistributedSampler(ds, drop_last=True, seed=11)
        loader = DataLoader(ds, sampler=sampler, batch_size=10)
        model = nn.Linear(4, 1).to(device)
        ddp = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
        for epoch in range(3):
            sampler.set_epoch(epoch)
            for i, (xb, yb) in enumerate(loader):
                opt.zero_grad()
                loss = ((ddp(xb.to(device)) - yb.to(device)) ** 2).mean()
                loss.backward()
                opt.step()
            print(f"[rank {dist.get_rank()}] epoch {epoch} batches {i + 1}")
            if dist.get_rank() == 0:
                torch.save(ddp.module.state_dict(), f"ckpt_epoch{epoch}.pt")
            dist.barrier()
    finally:
        dist.destroy_process_group()


main()
