import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.nn.utils import clip_grads_with_norm_, get_total_norm
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

MAX_NORM = 0.25  # small on purpose: clipping is active on most steps


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
            norms = []
            for xb, yb in loader:
                opt.zero_grad()
                nn.functional.mse_loss(model(xb.to(device)), yb.to(device)).backward()
                grads = [p.grad for p in model.parameters() if p.grad is not None]
                total = get_total_norm(grads, norm_type=2.0)
                clip_grads_with_norm_(model.parameters(), MAX_NORM, total)
                norms.append(total.item())
                opt.step()
            if dist.get_rank() == 0:
                print(f"epoch {epoch} mean grad norm {sum(norms) / len(norms):.3f}")
                torch.save(model.module.state_dict(), "checkpoint.pt")
            dist.barrier()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
