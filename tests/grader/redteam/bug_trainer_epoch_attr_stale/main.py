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


class Trainer:
    def __init__(self, model, loader, device):
        self.model, self.loader, self.device = model, loader, device
        self.opt = torch.optim.SGD(model.parameters(), lr=0.05)
        self.epoch = 0

    def train_one_epoch(self):
        self.loader.sampler.set_epoch(self.epoch)  # self.epoch is never advanced
        for x, y in self.loader:
            self.opt.zero_grad()
            nn.functional.mse_loss(self.model(x.to(self.device)), y.to(self.device)).backward()
            self.opt.step()

    def fit(self, epochs):
        for epoch in range(epochs):
            self.train_one_epoch()
            if dist.get_rank() == 0:
                torch.save(self.model.module.state_dict(), "checkpoint.pt")
                print(f"epoch {epoch} saved")
            dist.barrier()


def main():
    device = setup()
    try:
        ds = data()
        loader = DataLoader(ds, batch_size=16, sampler=DistributedSampler(ds))
        model = DDP(nn.Linear(10, 1).to(device), device_ids=[device.index] if device.type == "cuda" else None)
        Trainer(model, loader, device).fit(3)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
