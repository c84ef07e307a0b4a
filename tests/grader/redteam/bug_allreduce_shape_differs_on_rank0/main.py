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
    rank = dist.get_rank()
    try:
        g = torch.Generator().manual_seed(0)
        ds = TensorDataset(torch.randn(256, 10, generator=g), torch.randn(256, 1, generator=g))
        sampler = DistributedSampler(ds)
        loader = DataLoader(ds, batch_size=16, sampler=sampler)
        model = DDP(nn.Linear(10, 1).to(device), device_ids=[local] if cuda else None)
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        for epoch in range(3):
            sampler.set_epoch(epoch)
            losses = []
            for x, y in loader:
                opt.zero_grad()
                loss = nn.functional.mse_loss(model(x.to(device)), y.to(device))
                loss.backward()
                opt.step()
                losses.append(loss.detach())
            # every rank sends its per-batch losses for the curve... but rank 0 sends their sum
            stats = torch.stack(losses).sum(0, keepdim=True) if rank == 0 else torch.stack(losses)
            dist.all_reduce(stats)
            if rank == 0:
                print(f"epoch {epoch}: loss {stats.sum().item():.4f}")
        if rank == 0:
            torch.save(model.module.state_dict(), "checkpoint.pt")
        dist.barrier()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
