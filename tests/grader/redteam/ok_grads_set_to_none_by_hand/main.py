"""Correct: no optimizer.zero_grad(); the gradients are dropped by hand (`p.grad = None`) right
before each backward, after the forward, and the loss is a sum over the batch divided by its size
(a mean spelled by hand)."""

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main() -> None:
    dist.init_process_group("gloo")
    torch.manual_seed(11)
    inputs = torch.randn(160, 8)
    targets = inputs @ torch.randn(8, 2)
    data = TensorDataset(inputs, targets)
    sampler = DistributedSampler(data)
    model = DistributedDataParallel(nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9, nesterov=True)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        for xb, yb in DataLoader(data, batch_size=16, sampler=sampler):
            pred = model(xb)
            for p in model.parameters():
                p.grad = None
            loss = ((pred - yb) ** 2).sum() / (len(xb) * 2)
            loss.backward()
            opt.step()
    if dist.get_rank() == 0:
        torch.save(model.module.state_dict(), "final.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
