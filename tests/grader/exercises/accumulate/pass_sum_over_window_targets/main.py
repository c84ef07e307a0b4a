"""Correct: a classifier whose micro-batch losses are cross_entropy(reduction="sum") divided by
the number of targets in the whole accumulation window (counted before the window starts), the
same step as the mean over each micro-batch divided by k. Micro-batches come from one list."""

import itertools

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

K = 4


def main() -> None:
    dist.init_process_group("gloo")
    g = torch.Generator().manual_seed(9)
    x = torch.randn(320, 12, generator=g)
    y = (x[:, :4] @ torch.randn(4, 3, generator=g)).argmax(dim=1)
    data = TensorDataset(x, y)
    sampler = DistributedSampler(data, shuffle=True, seed=1)
    torch.manual_seed(4)
    model = DDP(nn.Sequential(nn.Linear(12, 24), nn.Tanh(), nn.Linear(24, 3)))
    optim = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.5)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        batches = iter(DataLoader(data, batch_size=10, sampler=sampler))
        while window := list(itertools.islice(batches, K)):
            n_targets = sum(len(t) for _, t in window)
            for j, (inputs, targets) in enumerate(window):
                ctx = model.no_sync() if j < len(window) - 1 else torch.enable_grad()
                with ctx:
                    loss = F.cross_entropy(model(inputs), targets, reduction="sum") / n_targets
                    loss.backward()
            optim.step()
            optim.zero_grad(set_to_none=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
