import os
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

CKPT = "train_state.pt"
EPOCHS = 3


def main():
    cuda = torch.cuda.is_available()
    local = int(os.environ["LOCAL_RANK"])
    if cuda:
        torch.cuda.set_device(local)
    device = torch.device("cuda", local) if cuda else torch.device("cpu")
    dist.init_process_group("nccl" if cuda else "gloo")
    rank = dist.get_rank()
    try:
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 1)).to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.05)  # built before wrapping: same tensors
        start_epoch = 0
        if os.path.exists(CKPT):
            ckpt = torch.load(CKPT, map_location=device)
            model.load_state_dict(ckpt["model"])
            opt.load_state_dict(ckpt["optim"])
            start_epoch = ckpt["epoch"] + 1
            print(f"rank {rank}: resuming at epoch {start_epoch}")
        ddp = DDP(model, device_ids=[local] if cuda else None)

        g = torch.Generator().manual_seed(0)
        x = torch.randn(256, 10, generator=g)
        ds = TensorDataset(x, x.sum(1, keepdim=True))
        sampler = DistributedSampler(ds)
        loader = DataLoader(ds, batch_size=16, sampler=sampler)
        for epoch in range(start_epoch, EPOCHS):
            sampler.set_epoch(epoch)
            for xb, yb in loader:
                opt.zero_grad()
                nn.functional.mse_loss(ddp(xb.to(device)), yb.to(device)).backward()
                opt.step()
            if rank == 0:
                torch.save({"model": model.state_dict(), "optim": opt.state_dict(), "epoch": epoch}, CKPT)
            dist.barrier()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
