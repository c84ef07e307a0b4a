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


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.f = nn.Sequential(nn.Linear(10, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Dropout(0.1), nn.Linear(32, 1))

    def forward(self, x):
        return self.f(x)


def main():
    device = setup()
    rank = dist.get_rank()
    try:
        ds = data()
        sampler = DistributedSampler(ds)
        loader = DataLoader(ds, batch_size=32, sampler=sampler)
        val_x, val_y = ds.tensors[0][:64].to(device), ds.tensors[1][:64].to(device)
        torch.manual_seed(0)
        model = DDP(Net().to(device), device_ids=[device.index] if device.type == "cuda" else None)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        for epoch in range(2):
            sampler.set_epoch(epoch)
            model.train()
            for x, y in loader:
                opt.zero_grad()
                nn.functional.mse_loss(model(x.to(device)), y.to(device)).backward()
                opt.step()
            if rank == 0:
                # rank-0-only evaluation through the *inner* module: no DDP forward, no collective
                inner = model.module
                inner.eval()
                with torch.no_grad():
                    val = nn.functional.mse_loss(inner(val_x), val_y).item()
                print(f"epoch {epoch} val {val:.4f}")
                torch.save(inner.state_dict(), "checkpoint.pt")
            dist.barrier()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
