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
        x = torch.randn(256, 10, generator=g)
        ds = TensorDataset(x, x @ torch.randn(10, 1, generator=g))
        sampler = DistributedSampler(ds)
        loader = DataLoader(ds, batch_size=16, sampler=sampler)
        torch.manual_seed(0)
        model = DDP(nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1)).to(device),
                    device_ids=[local] if cuda else None)
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        loss_fn = nn.MSELoss()
        # "initial loss" on a few samples, forgetting torch.no_grad(): wasteful but harmless
        init_loss = loss_fn(model(x[:32].to(device)), ds.tensors[1][:32].to(device)).item()
        if dist.get_rank() == 0:
            print(f"initial loss {init_loss:.4f}")
        for epoch in range(2):
            sampler.set_epoch(epoch)
            for xb, yb in loader:
                opt.zero_grad()
                loss_fn(model(xb.to(device)), yb.to(device)).backward()
                opt.step()
            if dist.get_rank() == 0:
                torch.save(model.module.state_dict(), "checkpoint.pt")
            dist.barrier()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
