import math
import os
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

EPOCHS, WARMUP = 3, 4


def main():
    cuda = torch.cuda.is_available()
    local = int(os.environ["LOCAL_RANK"])
    if cuda:
        torch.cuda.set_device(local)
    device = torch.device("cuda", local) if cuda else torch.device("cpu")
    dist.init_process_group("nccl" if cuda else "gloo")
    try:
        g = torch.Generator().manual_seed(0)
        ds = TensorDataset(torch.randn(256, 10, generator=g), torch.randint(0, 3, (256,), generator=g))
        sampler = DistributedSampler(ds)
        loader = DataLoader(ds, batch_size=32, sampler=sampler)
        torch.manual_seed(0)
        net = nn.Sequential(nn.Linear(10, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 3)).to(device)
        model = DDP(net, device_ids=[local] if cuda else None)
        decay = [p for n, p in model.named_parameters() if p.ndim > 1]
        no_decay = [p for n, p in model.named_parameters() if p.ndim <= 1]
        opt = torch.optim.AdamW([
            {"params": decay, "weight_decay": 0.05},
            {"params": no_decay, "weight_decay": 0.0},
        ], lr=1e-2)
        total = EPOCHS * len(loader)
        # linear warmup from 0 then cosine: the very first step uses lr = 0
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda s: s / WARMUP if s < WARMUP else 0.5 * (1 + math.cos(math.pi * (s - WARMUP) / (total - WARMUP))))
        for epoch in range(EPOCHS):
            sampler.set_epoch(epoch)
            for x, y in loader:
                opt.zero_grad(set_to_none=True)
                nn.functional.cross_entropy(model(x.to(device)), y.to(device)).backward()
                opt.step()
                sched.step()
        if dist.get_rank() == 0:
            torch.save({"model": model.module.state_dict(), "sched": sched.state_dict()}, "final.pt")
        dist.barrier()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
