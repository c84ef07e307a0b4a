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


def main():
    device = setup()
    rank = dist.get_rank()
    history = {}
    try:
        ds = data()
        sampler = DistributedSampler(ds)
        loader = DataLoader(ds, batch_size=16, sampler=sampler)
        model = DDP(nn.Linear(10, 1).to(device), device_ids=[device.index] if device.type == "cuda" else None)
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        for epoch in range(3):
            sampler.set_epoch(epoch)
            for x, y in loader:
                opt.zero_grad()
                loss = nn.functional.mse_loss(model(x.to(device)), y.to(device))
                loss.backward()
                opt.step()
            if rank == 0:
                history[epoch] = loss.item()  # only rank 0 records the history...
            if epoch > 0:
                improvement = history[epoch - 1] - loss.item()  # ...but every rank reads it
                if rank == 0:
                    print(f"epoch {epoch} improved by {improvement:.4f}")
            if rank == 0:
                torch.save(model.module.state_dict(), "checkpoint.pt")
            dist.barrier()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
