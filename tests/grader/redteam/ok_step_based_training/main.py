"""Step-based training: a fixed number of optimizer steps, epochs are whatever that takes."""
import os
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

TOTAL_STEPS = 20  # 8 steps per epoch -> epochs of 8, 8 and 4 steps
SAVE_EVERY = 10


def main():
    cuda = torch.cuda.is_available()
    local = int(os.environ["LOCAL_RANK"])
    if cuda:
        torch.cuda.set_device(local)
    device = torch.device("cuda", local) if cuda else torch.device("cpu")
    dist.init_process_group("nccl" if cuda else "gloo")
    try:
        g = torch.Generator().manual_seed(0)
        ds = TensorDataset(torch.randn(256, 10, generator=g), torch.randn(256, 1, generator=g))
        sampler = DistributedSampler(ds)
        loader = DataLoader(ds, batch_size=16, sampler=sampler)
        model = DDP(nn.Linear(10, 1).to(device), device_ids=[local] if cuda else None)
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        step, epoch = 0, 0
        while step < TOTAL_STEPS:
            sampler.set_epoch(epoch)
            for x, y in loader:
                opt.zero_grad()
                nn.functional.mse_loss(model(x.to(device)), y.to(device)).backward()
                opt.step()
                step += 1
                if step % SAVE_EVERY == 0:
                    if dist.get_rank() == 0:
                        torch.save(model.module.state_dict(), f"step{step}.pt")
                    dist.barrier()
                if step >= TOTAL_STEPS:
                    break
            epoch += 1
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
