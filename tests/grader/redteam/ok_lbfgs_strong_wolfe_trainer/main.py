"""A trainer class driving LBFGS (strong Wolfe line search) with closure=..., after a probe loss."""
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


class Trainer:
    def __init__(self, model, dataset, device):
        self.device = device
        self.model = DDP(model.to(device), device_ids=[device.index] if device.type == "cuda" else None)
        self.sampler = DistributedSampler(dataset, seed=3)
        self.loader = DataLoader(dataset, batch_size=32, sampler=self.sampler, drop_last=True)
        self.opt = torch.optim.LBFGS(self.model.parameters(), lr=1.0, max_iter=3,
                                     line_search_fn="strong_wolfe")

    def _step(self, x, y):
        def closure():
            self.opt.zero_grad(set_to_none=True)
            loss = nn.functional.smooth_l1_loss(self.model(x), y)
            loss.backward()
            # The line search decides on the loss: every rank must see the same (global) one,
            # or the ranks take different numbers of evaluations and fall out of step.
            global_loss = loss.detach().clone()
            dist.all_reduce(global_loss)
            return global_loss / dist.get_world_size()

        return self.opt.step(closure=closure)

    def fit(self, epochs):
        for epoch in range(epochs):
            self.sampler.set_epoch(epoch)
            for x, y in self.loader:
                loss = self._step(x.to(self.device), y.to(self.device))
            if dist.get_rank() == 0:
                print(f"epoch {epoch}: loss {float(loss):.4f}")
                torch.save(self.model.module.state_dict(), "checkpoint.pt")
            dist.barrier()


def main():
    cuda = torch.cuda.is_available()
    local = int(os.environ["LOCAL_RANK"])
    if cuda:
        torch.cuda.set_device(local)
    device = torch.device("cuda", local) if cuda else torch.device("cpu")
    dist.init_process_group("nccl" if cuda else "gloo")
    try:
        g = torch.Generator().manual_seed(0)
        ds = TensorDataset(torch.randn(256, 8, generator=g), torch.randn(256, 1, generator=g))
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))
        Trainer(model, ds, device).fit(epochs=2)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
