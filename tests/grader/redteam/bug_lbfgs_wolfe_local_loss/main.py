"""LBFGS with a strong-Wolfe line search, the closure returning each rank's OWN loss: the line
search compares loss values, so the ranks can choose different step lengths."""

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main() -> None:
    dist.init_process_group("gloo")
    g = torch.Generator().manual_seed(0)
    x = torch.randn(128, 5, generator=g)
    ds = TensorDataset(x, torch.sin(x.sum(1, keepdim=True)) + 0.1 * torch.randn(128, 1, generator=g))
    sampler = DistributedSampler(ds, seed=3)
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 1)))
    opt = torch.optim.LBFGS(model.parameters(), lr=1.0, max_iter=5, line_search_fn="strong_wolfe")
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for xb, yb in DataLoader(ds, batch_size=32, sampler=sampler):

            def closure() -> torch.Tensor:
                opt.zero_grad()
                loss = nn.functional.mse_loss(model(xb), yb)
                loss.backward()
                return loss

            opt.step(closure)
    if dist.get_rank() == 0:
        torch.save(model.module.state_dict(), "lbfgs.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
