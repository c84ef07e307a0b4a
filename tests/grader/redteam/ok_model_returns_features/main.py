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


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(10, 32), nn.ReLU())
        self.head = nn.Linear(32, 3)

    def forward(self, x):
        features = self.backbone(x)
        return self.head(features), features  # features returned for logging / probing


def main():
    device = setup()
    try:
        ds = data()
        sampler = DistributedSampler(ds)
        loader = DataLoader(ds, batch_size=16, sampler=sampler)
        torch.manual_seed(0)
        model = DDP(Classifier().to(device), device_ids=[device.index] if device.type == "cuda" else None)
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        for epoch in range(2):
            sampler.set_epoch(epoch)
            for x, y in loader:
                labels = (y.squeeze(1) > 0).long() + (y.squeeze(1) > 1).long()
                opt.zero_grad()
                logits, features = model(x.to(device))
                loss = nn.functional.cross_entropy(logits, labels.to(device))
                loss.backward()
                opt.step()
            if dist.get_rank() == 0:
                print(f"epoch {epoch} feature norm {features.norm(dim=1).mean().item():.3f}")
        if dist.get_rank() == 0:
            torch.save(model.module.state_dict(), "checkpoint.pt")
        dist.barrier()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
