"""Bug: the gradients are cleared once, before the loop, never after a step. The first step is
right; every later step adds the gradients of all earlier steps to its own."""

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main() -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    x = torch.randn(128, 20)
    y = x[:, :1] * 2 + 0.1 * torch.randn(128, 1)
    ds = TensorDataset(x, y)
    sampler = DistributedSampler(ds)
    loader = DataLoader(ds, batch_size=16, sampler=sampler)
    model = DDP(torch.nn.Linear(20, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    opt.zero_grad()
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            loss = F.mse_loss(model(xb), yb)
            loss.backward()
            opt.step()
    if rank == 0:
        torch.save(model.module.state_dict(), "model.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
