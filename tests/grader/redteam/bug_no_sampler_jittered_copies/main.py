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


def main():
    device = setup()
    torch.manual_seed(dist.get_rank())  # per-rank seed "so augmentation differs across ranks"
    try:
        base = data()
        x, y = base.tensors
        # augmentation baked in when the dataset is built: every rank gets a jittered copy of ALL samples
        ds = TensorDataset(x + 0.01 * torch.randn_like(x), y)
        loader = DataLoader(ds, batch_size=16, shuffle=True)  # and no DistributedSampler
        model = DDP(nn.Linear(10, 1).to(device), device_ids=[device.index] if device.type == "cuda" else None)
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        for epoch in range(2):
            for xb, yb in loader:
                opt.zero_grad()
                nn.functional.mse_loss(model(xb.to(device)), yb.to(device)).backward()
                opt.step()
        if dist.get_rank() == 0:
            torch.save(model.module.state_dict(), "checkpoint.pt")
        dist.barrier()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
