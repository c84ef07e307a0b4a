import os
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main():
    cuda = torch.cuda.is_available()
    local = int(os.environ["LOCAL_RANK"])
    if cuda:
        torch.cuda.set_device(local)
    device = torch.device("cuda", local) if cuda else torch.device("cpu")
    dist.init_process_group("nccl" if cuda else "gloo")
    try:
        g = torch.Generator().manual_seed(0)
        x, y = torch.randn(320, 10, generator=g), torch.randn(320, 1, generator=g)
        train_ds, val_ds = TensorDataset(x[:256], y[:256]), TensorDataset(x[256:], y[256:])
        train_sampler, val_sampler = DistributedSampler(train_ds), DistributedSampler(val_ds)
        train_loader = DataLoader(train_ds, batch_size=16, sampler=train_sampler)
        val_loader = DataLoader(val_ds, batch_size=16, sampler=val_sampler)
        model = DDP(nn.Linear(10, 1).to(device), device_ids=[local] if cuda else None)
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        for epoch in range(3):
            val_sampler.set_epoch(epoch)  # copy-paste slip: the wrong sampler
            for xb, yb in train_loader:
                opt.zero_grad()
                nn.functional.mse_loss(model(xb.to(device)), yb.to(device)).backward()
                opt.step()
            with torch.no_grad():
                val = sum(nn.functional.mse_loss(model(a), b).item() for a, b in val_loader)
            if dist.get_rank() == 0:
                print(f"epoch {epoch} val {val:.3f}")
                torch.save(model.module.state_dict(), "checkpoint.pt")
            dist.barrier()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
