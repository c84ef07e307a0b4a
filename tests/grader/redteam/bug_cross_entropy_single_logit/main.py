"""A binary classifier with ONE output column trained with cross_entropy: softmax over a single
logit is always 1, the loss is always 0 and its gradient is identically zero. Nothing trains."""

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main() -> None:
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 6, generator=g)
    ds = TensorDataset(x, torch.zeros(64, dtype=torch.long))
    sampler = DistributedSampler(ds)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for xb, yb in DataLoader(ds, batch_size=8, sampler=sampler):
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
    if dist.get_rank() == 0:
        torch.save(model.module.state_dict(), "classifier.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
