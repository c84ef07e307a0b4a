"""Correct: the loss is cross_entropy called with keyword arguments only, reduction="sum",
divided by the number of labelled samples in the batch (labels of -1 are ignored): the mean over
the labelled samples, spelled by hand."""

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main() -> None:
    dist.init_process_group("gloo")
    g = torch.Generator().manual_seed(12)
    x = torch.randn(192, 9, generator=g)
    labels = (x[:, :3] @ torch.randn(3, 4, generator=g)).argmax(1)
    labels[::7] = -1  # unlabelled samples
    data = TensorDataset(x, labels)
    sampler = DistributedSampler(data, seed=5)
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(9, 20), nn.ReLU(), nn.Linear(20, 4)))
    opt = torch.optim.RMSprop(model.parameters(), lr=1e-3)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for feats, y in DataLoader(data, batch_size=24, sampler=sampler):
            opt.zero_grad()
            total = F.cross_entropy(input=model(feats), target=y, ignore_index=-1, reduction="sum")
            loss = total / (y != -1).sum().clamp(min=1)
            loss.backward()
            opt.step()
    if dist.get_rank() == 0:
        torch.save(model.module.state_dict(), "clf.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
