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


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(10, 16)
        self.mean = nn.Linear(16, 1)
        self.log_var = nn.Linear(16, 1)

    def forward(self, *, features):  # keyword-only input, dict output
        h = torch.tanh(self.enc(features))
        return {"mean": self.mean(h), "log_var": self.log_var(h)}


def main():
    device = setup()
    try:
        ds = data()
        sampler = DistributedSampler(ds)
        loader = DataLoader(ds, batch_size=16, sampler=sampler)
        torch.manual_seed(0)
        model = DDP(Regressor().to(device), device_ids=[device.index] if device.type == "cuda" else None)
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        for epoch in range(2):
            sampler.set_epoch(epoch)
            for x, y in loader:
                opt.zero_grad()
                out = model(features=x.to(device))
                loss = nn.functional.gaussian_nll_loss(out["mean"], y.to(device), out["log_var"].exp())
                loss.backward()
                opt.step()
        if dist.get_rank() == 0:
            torch.save(model.module.state_dict(), "checkpoint.pt")
        dist.barrier()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
