import os
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main():
    cuda = torch.cuda.is_available()
    lr_ = int(os.environ["LOCAL_RANK"])
    if cuda:
        torch.cuda.set_device(lr_)
    dev = torch.device("cuda", lr_) if cuda else torch.device("cpu")
    dist.init_process_group("nccl" if cuda else "gloo")
    try:
        g = torch.Generator().manual_seed(0)
        ds = TensorDataset(torch.randn(128, 5, generator=g), torch.randn(128, 1, generator=g))
        sampler = DistributedSampler(ds)
        loader = DataLoader(ds, batch_size=16, sampler=sampler)
        model = DDP(nn.Linear(5, 1).to(dev), device_ids=[lr_] if cuda else None)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        sampler.set_epoch(0)
        for epoch in range(3):
            for x, y in loader:
                opt.zero_grad()
                nn.functional.mse_loss(model(x.to(dev)), y.to(dev)).backward()
                opt.step()
            # prepare the shuffle of the *next* epoch at the end of this one
            sampler.set_epoch(epoch + 1)
            if dist.get_rank() == 0:
                torch.save(model.module.state_dict(), "checkpoint.pt")
            dist.barrier()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
