import os
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def setup():
    cuda = torch.cuda.is_available()
    local = int(os.environ["LOCAL_RANK"])
    if cuda:
        torch.cuda.set_device(local)
    dist.init_process_group("nccl" if cuda else "gloo")
    return torch.device("cuda", local) if cuda else torch.device("cpu")


def data():
    g = torch.Generator().manual_seed(0)
    return TensorDataset(torch.randn(256, 10, generator=g), torch.randn(256, 1, generator=g))
from torch.utils.data import Dataset

N = 256


class RankShard(Dataset):
    """This rank's part of the data, as if each rank read its own pre-sharded file."""

    def __init__(self, rank: int, world: int):
        self.ids = list(range(rank, N, world))
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(N, 10, generator=g)
        self.y = self.x.sum(1, keepdim=True)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        j = self.ids[i]
        return self.x[j], self.y[j]


def main():
    device = setup()
    rank, world = dist.get_rank(), dist.get_world_size()
    try:
        shard = RankShard(rank, world)
        loader = DataLoader(shard, batch_size=16, shuffle=True,
                            generator=torch.Generator().manual_seed(1000 + rank))
        torch.manual_seed(0)
        model = DDP(nn.Linear(10, 1).to(device), device_ids=[device.index] if device.type == "cuda" else None)
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        for epoch in range(3):
            for x, y in loader:
                opt.zero_grad()
                nn.functional.mse_loss(model(x.to(device)), y.to(device)).backward()
                opt.step()
        if rank == 0:
            torch.save(model.module.state_dict(), "checkpoint.pt")
        dist.barrier()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
