import os
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main():
    gpu = torch.cuda.is_available()
    local_rank = int(os.environ["LOCAL_RANK"])
    device = torch.device(f"cuda:{local_rank}") if gpu else torch.device("cpu")
    if gpu:
        torch.cuda.set_device(device)
    dist.init_process_group(backend="nccl" if gpu else "gloo")
    try:
        x = torch.arange(0, 192, dtype=torch.float32).reshape(96, 2) / 192
        y = x[:, :1] * 3 - x[:, 1:] + 0.2
        ds = TensorDataset(x, y)
        # Deterministic, strided shards; no shuffling at all.
        sampler = DistributedSampler(ds, shuffle=False)
        loader = DataLoader(ds, batch_size=8, sampler=sampler)
        model = DDP(nn.Linear(2, 1).to(device), device_ids=[local_rank] if gpu else None)
        opt = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.5, nesterov=True)
        for epoch in range(3):
            sampler.set_epoch(epoch)  # harmless with shuffle=False
            for xb, yb in loader:
                opt.zero_grad()
                nn.MSELoss()(model(xb.to(device)), yb.to(device)).backward()
                opt.step()
        if dist.get_rank() == 0:
            torch.save(model.module.state_dict(), "linear.pt")
        dist.barrier()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
