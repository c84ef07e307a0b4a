"""Bug: the loss is a sum divided by the number of samples times the world size, "because DDP
sums the ranks": DDP averages them, so every step is world_size times too small."""

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main() -> None:
    dist.init_process_group("gloo")
    world = dist.get_world_size()
    g = torch.Generator().manual_seed(3)
    x = torch.randn(128, 5, generator=g)
    data = TensorDataset(x, x.sum(1, keepdim=True))
    sampler = DistributedSampler(data)
    torch.manual_seed(0)
    model = DDP(nn.Linear(5, 1))
    loss_fn = nn.MSELoss(reduction="sum")
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for xb, yb in DataLoader(data, batch_size=16, sampler=sampler):
            opt.zero_grad()
            loss = loss_fn(model(xb), yb) / (len(xb) * world)
            loss.backward()
            opt.step()
    if dist.get_rank() == 0:
        torch.save(model.module.state_dict(), "lin.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
