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
import io
from pathlib import Path


def upload(data: bytes, dest: Path) -> None:
    """Stand-in for an object-store upload: write the bytes, then move into place."""
    tmp = dest.with_name(dest.name + ".part")
    tmp.write_bytes(data)
    tmp.replace(dest)


def main():
    device = setup()
    try:
        ds = data()
        sampler = DistributedSampler(ds)
        loader = DataLoader(ds, batch_size=16, sampler=sampler)
        model = DDP(nn.Linear(10, 1).to(device), device_ids=[device.index] if device.type == "cuda" else None)
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        for epoch in range(2):
            sampler.set_epoch(epoch)
            for x, y in loader:
                opt.zero_grad()
                nn.functional.mse_loss(model(x.to(device)), y.to(device)).backward()
                opt.step()
            if dist.get_rank() == 0:
                buf = io.BytesIO()
                torch.save(model.module.state_dict(), buf)  # serialise in memory, then "upload"
                upload(buf.getvalue(), Path("checkpoint.pt"))
            dist.barrier()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
