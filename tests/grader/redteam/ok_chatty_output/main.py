import os
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

torch.set_printoptions(precision=6, linewidth=200)


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
        ds = TensorDataset(torch.randn(512, 64, generator=g), torch.randn(512, 1, generator=g))
        sampler = DistributedSampler(ds)
        loader = DataLoader(ds, batch_size=4, sampler=sampler)
        model = DDP(nn.Linear(64, 1).to(device), device_ids=[local] if cuda else None)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        for epoch in range(3):
            sampler.set_epoch(epoch)
            for step, (x, y) in enumerate(loader):
                opt.zero_grad()
                loss = nn.functional.mse_loss(model(x.to(device)), y.to(device))
                loss.backward()
                opt.step()
                # very verbose debugging output on every rank, every step (~2 KB a line)
                print(f"[rank {rank}] epoch {epoch} step {step} loss {loss.item():.6f} "
                      f"grad {model.module.weight.grad} weight {model.module.weight.data}")
        if rank == 0:
            torch.save(model.module.state_dict(), "checkpoint.pt")
        dist.barrier()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
