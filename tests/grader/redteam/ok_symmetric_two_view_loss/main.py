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
import torch.nn.functional as F


class SimSiamLite(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 16))
        self.predictor = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 16))

    def forward(self, views):
        z = self.encoder(views)
        return z, self.predictor(z)


def D(p, z):
    # negative cosine similarity with a stop-gradient on z (SimSiam)
    return -F.cosine_similarity(p, z.detach(), dim=-1).mean()


def main():
    device = setup()
    try:
        ds = data()
        sampler = DistributedSampler(ds)
        loader = DataLoader(ds, batch_size=16, sampler=sampler)
        torch.manual_seed(0)
        model = DDP(SimSiamLite().to(device), device_ids=[device.index] if device.type == "cuda" else None)
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        g = torch.Generator().manual_seed(dist.get_rank())
        for epoch in range(2):
            sampler.set_epoch(epoch)
            for x, _ in loader:
                x = x.to(device)
                x1 = x + 0.1 * torch.randn(x.shape, generator=g).to(device)
                x2 = x + 0.1 * torch.randn(x.shape, generator=g).to(device)
                z, p = model(torch.cat([x1, x2]))  # both views in one forward
                z1, z2 = z.chunk(2)
                p1, p2 = p.chunk(2)
                loss = (D(p1, z2) + D(p2, z1)) / 2  # symmetric loss: mean over the two views
                opt.zero_grad()
                loss.backward()
                opt.step()
        if dist.get_rank() == 0:
            torch.save(model.module.state_dict(), "checkpoint.pt")
        dist.barrier()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
