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


class TwoTask(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(10, 16), nn.ReLU())
        self.reg = nn.Linear(16, 1)
        self.cls = nn.Linear(16, 2)

    def forward(self, x):
        h = self.body(x)
        return self.reg(h), self.cls(h)


def main():
    device = setup()
    world = dist.get_world_size()
    try:
        ds = data()
        sampler = DistributedSampler(ds)
        loader = DataLoader(ds, batch_size=16, sampler=sampler)
        torch.manual_seed(0)
        model = DDP(TwoTask().to(device), device_ids=[device.index] if device.type == "cuda" else None)
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        for epoch in range(2):
            sampler.set_epoch(epoch)
            for x, y in loader:
                x, y = x.to(device), y.to(device)
                opt.zero_grad()
                reg, logits = model(x)
                labels = (y.squeeze(1) > 0).long()
                loss = nn.functional.mse_loss(reg, y) + 0.5 * nn.functional.cross_entropy(logits, labels)
                (loss / world).backward()  # "average over the ranks"
                opt.step()
        if dist.get_rank() == 0:
            torch.save(model.module.state_dict(), "checkpoint.pt")
        dist.barrier()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
