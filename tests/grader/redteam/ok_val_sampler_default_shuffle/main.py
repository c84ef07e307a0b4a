import os
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset, random_split


def main():
    cuda = torch.cuda.is_available()
    local = int(os.environ["LOCAL_RANK"])
    if cuda:
        torch.cuda.set_device(local)
    device = torch.device("cuda", local) if cuda else torch.device("cpu")
    dist.init_process_group("nccl" if cuda else "gloo")
    try:
        g = torch.Generator().manual_seed(0)
        full = TensorDataset(torch.randn(300, 5, generator=g), torch.randint(0, 2, (300,), generator=g))
        # the split is seeded, so every rank gets the same split
        train_ds, val_ds = random_split(full, [240, 60], generator=torch.Generator().manual_seed(1))
        tr_s = DistributedSampler(train_ds)
        va_s = DistributedSampler(val_ds)  # shuffles by default; never set_epoch'd (order irrelevant)
        tr = DataLoader(train_ds, batch_size=20, sampler=tr_s)
        va = DataLoader(val_ds, batch_size=20, sampler=va_s)
        model = DDP(nn.Linear(5, 2).to(device), device_ids=[local] if cuda else None)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in range(3):
            tr_s.set_epoch(epoch)
            model.train()
            for x, y in tr:
                opt.zero_grad()
                nn.functional.cross_entropy(model(x.to(device)), y.to(device)).backward()
                opt.step()
            model.eval()
            hits = torch.zeros(1, device=device)
            with torch.no_grad():
                for x, y in va:
                    hits += (model(x.to(device)).argmax(1) == y.to(device)).sum()
            dist.all_reduce(hits)
            if dist.get_rank() == 0:
                print(f"epoch {epoch} val acc {hits.item() / 60:.2f}")
        if dist.get_rank() == 0:
            torch.save(model.module.state_dict(), "checkpoint.pt")
        dist.barrier()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
