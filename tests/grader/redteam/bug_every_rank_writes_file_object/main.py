"""Bug: the checkpoint is written through a file object opened on disk, on every rank (no rank
guard), to the same file name."""

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main() -> None:
    dist.init_process_group("gloo")
    torch.manual_seed(7)
    ds = TensorDataset(torch.randn(128, 5), torch.randint(0, 3, (128,)))
    sampler = DistributedSampler(ds)
    model = DDP(nn.Linear(5, 3))
    sgd = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for features, label in DataLoader(ds, batch_size=8, sampler=sampler):
            sgd.zero_grad()
            F.cross_entropy(model(features), label).backward()
            sgd.step()
    handle = open("weights.ckpt", "wb")
    try:
        torch.save(model.module.state_dict(), handle)
    finally:
        handle.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
