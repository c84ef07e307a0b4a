import os
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

local_rank = int(os.environ["LOCAL_RANK"])
device = torch.device("cuda", local_rank) if torch.cuda.is_available() else torch.device("cpu")
if device.type == "cuda":
    torch.cuda.set_device(device)

# Model built BEFORE the process group exists, seeded per rank: DDP's broadcast fixes it.
torch.manual_seed(int(os.environ["RANK"]))
model = nn.Sequential(nn.Linear(10, 20), nn.ReLU(), nn.Linear(20, 1)).to(device)


def main():
    dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
    try:
        ddp = DDP(model, device_ids=[local_rank] if device.type == "cuda" else None)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.02)
        g = torch.Generator().manual_seed(0)
        ds = TensorDataset(torch.randn(256, 10, generator=g), torch.randn(256, 1, generator=g))
        sampler = DistributedSampler(ds)
        loader = DataLoader(ds, batch_size=32, sampler=sampler)
        for epoch in range(3):
            sampler.set_epoch(epoch)
            for xb, yb in loader:
                opt.zero_grad()
                nn.functional.mse_loss(ddp(xb.to(device)), yb.to(device)).backward()
                opt.step()
        if dist.get_rank() == 0:
            torch.save(ddp.module.state_dict(), "checkpoint.pt")
        dist.barrier()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
