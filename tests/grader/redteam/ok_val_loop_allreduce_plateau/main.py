import os
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def evaluate(model, loader, device):
    model.eval()
    stats = torch.zeros(2, device=device)  # [sum of losses, count]
    with torch.no_grad():
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            out = model(x)  # through the DDP wrapper
            stats[0] += nn.functional.mse_loss(out, y, reduction="sum")
            stats[1] += y.numel()
    dist.all_reduce(stats, op=dist.ReduceOp.SUM)
    model.train()
    return (stats[0] / stats[1]).item()


def main():
    cuda = torch.cuda.is_available()
    local = int(os.environ["LOCAL_RANK"])
    if cuda:
        torch.cuda.set_device(local)
    device = torch.device("cuda", local) if cuda else torch.device("cpu")
    dist.init_process_group("nccl" if cuda else "gloo")
    try:
        g = torch.Generator().manual_seed(0)
        x = torch.randn(320, 10, generator=g)
        y = x @ torch.randn(10, 1, generator=g)
        train_ds = TensorDataset(x[:256], y[:256])
        val_ds = TensorDataset(x[256:], y[256:])
        train_sampler = DistributedSampler(train_ds, shuffle=True)
        val_sampler = DistributedSampler(val_ds, shuffle=False)  # no set_epoch needed
        train_loader = DataLoader(train_ds, batch_size=16, sampler=train_sampler)
        val_loader = DataLoader(val_ds, batch_size=16, sampler=val_sampler)
        torch.manual_seed(0)
        model = DDP(nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1)).to(device),
                    device_ids=[local] if cuda else None)
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=0, factor=0.5)
        for epoch in range(3):
            train_sampler.set_epoch(epoch)
            for xb, yb in train_loader:
                opt.zero_grad()
                nn.functional.mse_loss(model(xb.to(device)), yb.to(device)).backward()
                opt.step()
            val = evaluate(model, val_loader, device)
            sched.step(val)  # the same global value on every rank
            if dist.get_rank() == 0:
                print(f"epoch {epoch} val {val:.4f} lr {opt.param_groups[0]['lr']}")
                torch.save(model.module.state_dict(), "checkpoint.pt")
            dist.barrier()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
