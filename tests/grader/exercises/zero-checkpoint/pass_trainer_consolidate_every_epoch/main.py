"""A Trainer with ZeRO (SGD with momentum) that consolidates and saves a tuple checkpoint at the
end of every epoch."""

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


class Trainer:
    def __init__(self) -> None:
        torch.manual_seed(0)
        self.model = DDP(nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2)))
        self.opt = ZeroRedundancyOptimizer(
            self.model.parameters(), optimizer_class=torch.optim.SGD, lr=0.05, momentum=0.9
        )
        g = torch.Generator().manual_seed(0)
        ds = TensorDataset(torch.randn(48, 4, generator=g), torch.randint(0, 2, (48,), generator=g))
        self.sampler = DistributedSampler(ds)
        self.loader = DataLoader(ds, batch_size=6, sampler=self.sampler)

    def save(self, epoch: int) -> None:
        self.opt.consolidate_state_dict(to=0)
        if dist.get_rank() == 0:
            torch.save((epoch, self.model.module.state_dict(), self.opt.state_dict()), "zero.ckpt")
        dist.barrier()

    def fit(self, epochs: int) -> None:
        for epoch in range(epochs):
            self.sampler.set_epoch(epoch)
            for x, y in self.loader:
                self.opt.zero_grad()
                nn.functional.cross_entropy(self.model(x), y).backward()
                self.opt.step()
            self.save(epoch)


if __name__ == "__main__":
    dist.init_process_group("gloo")
    Trainer().fit(3)
    dist.destroy_process_group()
