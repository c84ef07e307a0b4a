import os
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


@torch.no_grad()
def clip_by_global_norm(params, max_norm):
    """Hand-written global-norm clipping (as in many older codebases). Returns the norm."""
    params = [p for p in params if p.grad is not None]
    total = torch.sqrt(sum((p.grad.detach() ** 2).sum() for p in params))
    coef = max_norm / (total + 1e-6)
    if coef < 1:
        for p in params:
            p.grad.mul_(coef)
    return total


def main():
    cuda = torch.cuda.is_available()
    local = int(os.environ["LOCAL_RANK"])
    if cuda:
        torch.cuda.set_device(local)
    device = torch.device("cuda", local) if cuda else torch.device("cpu")
    dist.init_process_group("nccl" if cuda else "gloo")
    try:
        g = torch.Generator().manual_seed(0)
        x = torch.randn(256, 10, generator=g)
        y = 3 * x @ torch.randn(10, 1, generator=g)
        ds = TensorDataset(x, y)
        sampler = DistributedSampler(ds)
        loader = DataLoader(ds, batch_size=16, sampler=sampler)
        torch.manual_seed(0)
        model = DDP(nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1)).to(device),
                    device_ids=[local] if cuda else None)
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        for epoch in range(2):
            sampler.set_epoch(epoch)
            for xb, yb in loader:
                opt.zero_grad()
                nn.functional.mse_loss(model(xb.to(device)), yb.to(device)).backward()
                clip_by_global_norm(model.parameters(), 0.25)
                opt.step()
            if dist.get_rank() == 0:
                torch.save(model.module.state_dict(), "checkpoint.pt")
            dist.barrier()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
