"""BatchNorm1d (no SyncBN) + dropout, per-rank seeds, broadcast_buffers=False."""
import os
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(10, 32)
        self.bn = nn.BatchNorm1d(32)
        self.drop = nn.Dropout(0.3)
        self.fc2 = nn.Linear(32, 4)

    def forward(self, x):
        return self.fc2(self.drop(torch.relu(self.bn(self.fc1(x)))))


def main():
    cuda = torch.cuda.is_available()
    local = int(os.environ["LOCAL_RANK"])
    if cuda:
        torch.cuda.set_device(local)
    device = torch.device("cuda", local) if cuda else torch.device("cpu")
    dist.init_process_group("nccl" if cuda else "gloo")
    rank = dist.get_rank()
    torch.manual_seed(1000 + rank)  # different init and dropout masks per rank: DDP syncs the init
    try:
        g = torch.Generator().manual_seed(0)
        x = torch.randn(256, 10, generator=g)
        y = torch.randint(0, 4, (256,), generator=g)
        ds = TensorDataset(x, y)
        sampler = DistributedSampler(ds, seed=1)
        loader = DataLoader(ds, batch_size=32, sampler=sampler)
        model = DDP(Net().to(device), device_ids=[local] if cuda else None, broadcast_buffers=False)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        for epoch in range(3):
            sampler.set_epoch(epoch)
            model.train()
            for xb, yb in loader:
                opt.zero_grad()
                loss = nn.functional.cross_entropy(model(xb.to(device)), yb.to(device))
                loss.backward()
                opt.step()
            if rank == 0:
                torch.save(model.module.state_dict(), "bn_net.pt")
            dist.barrier()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
