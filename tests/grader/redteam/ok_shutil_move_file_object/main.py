import os
import shutil
import tempfile

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def atomic_save(obj, path):
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=d, suffix=".partial")
    with os.fdopen(fd, "wb") as f:  # torch.save into an open file object
        torch.save(obj, f)
    shutil.move(tmp, path)


def main():
    cuda = torch.cuda.is_available()
    local = int(os.environ["LOCAL_RANK"])
    if cuda:
        torch.cuda.set_device(local)
    device = torch.device("cuda", local) if cuda else torch.device("cpu")
    dist.init_process_group("nccl" if cuda else "gloo")
    try:
        g = torch.Generator().manual_seed(4)
        ds = TensorDataset(torch.randn(128, 4, generator=g), torch.randn(128, 1, generator=g))
        sampler = DistributedSampler(ds)
        loader = DataLoader(ds, batch_size=16, sampler=sampler)
        torch.manual_seed(0)
        model = DDP(nn.Linear(4, 1).to(device), device_ids=[local] if cuda else None)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in range(3):
            sampler.set_epoch(epoch)
            for xb, yb in loader:
                opt.zero_grad()
                nn.functional.mse_loss(model(xb.to(device)), yb.to(device)).backward()
                opt.step()
            if dist.get_rank() == 0:
                atomic_save(model.module.state_dict(), "model.pt")
            dist.barrier()
        sd = torch.load("model.pt", map_location="cpu", weights_only=True)
        print(f"rank {dist.get_rank()}: checkpoint has {len(sd)} tensors")
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
