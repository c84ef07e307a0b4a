"""Bug: each micro-batch's loss is MSELoss(reduction="sum") divided by that micro-batch's own
size, a mean per micro-batch, but never divided by the number of micro-batches: the step is the
sum of 4 means, 4x the mean over the window."""

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

ACCUM = 4


def main() -> None:
    dist.init_process_group("gloo")
    g = torch.Generator().manual_seed(0)
    x = torch.randn(256, 10, generator=g)
    y = x @ torch.randn(10, 1, generator=g)
    data = TensorDataset(x, y)
    sampler = DistributedSampler(data, seed=3)
    torch.manual_seed(0)
    net = DistributedDataParallel(nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 1)))
    criterion = nn.MSELoss(reduction="sum")
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for i, (xb, yb) in enumerate(DataLoader(data, batch_size=8, sampler=sampler)):
            boundary = (i + 1) % ACCUM == 0
            if boundary:
                (criterion(net(xb), yb) / len(xb)).backward()
                opt.step()
                opt.zero_grad()
            else:
                with net.no_sync():
                    (criterion(net(xb), yb) / len(xb)).backward()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
