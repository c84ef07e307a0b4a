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
    try:
        ds = data()
        sampler = DistributedSampler(ds)
        loader = DataLoader(ds, batch_size=64, sampler=sampler)
        torch.manual_seed(0)
        model = DDP(nn.Linear(10, 1).to(device), device_ids=[device.index] if device.type == "cuda" else None)
        opt = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=4, history_size=5)
        for epoch in range(2):
            sampler.set_epoch(epoch)
            for x, y in loader:
                x, y = x.to(device), y.to(device)

                def closure():
                    opt.zero_grad()
                    loss = nn.functional.mse_loss(model(x), y)
                    loss.backward()
                    for p in model.parameters():  # DDP already averaged these: now summed
                        dist.all_reduce(p.grad)
                    return loss

                opt.step(closure)  # several forward/backward passes per step
            if dist.get_rank() == 0:
                torch.save(model.module.state_dict(), "checkpoint.pt")
            dist.barrier()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
