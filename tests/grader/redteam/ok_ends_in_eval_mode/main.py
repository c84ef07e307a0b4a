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


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(10, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Dropout(0.2))
        self.head = nn.Linear(32, 1)

    def forward(self, x):
        return self.head(self.body(x))


@torch.no_grad()
def evaluate(model, loader, device):
    model.eval()
    total = torch.zeros(2, device=device)
    for x, y in loader:
        total[0] += nn.functional.mse_loss(model(x.to(device)), y.to(device), reduction="sum")
        total[1] += len(y)
    dist.all_reduce(total)
    return (total[0] / total[1]).item()


def main():
    device = setup()
    try:
        ds = data()
        sampler = DistributedSampler(ds)
        loader = DataLoader(ds, batch_size=32, sampler=sampler)
        eval_loader = DataLoader(ds, batch_size=64, sampler=DistributedSampler(ds, shuffle=False))
        torch.manual_seed(0)
        model = DDP(Net().to(device), device_ids=[device.index] if device.type == "cuda" else None)
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        for epoch in range(2):
            sampler.set_epoch(epoch)
            model.train()
            for x, y in loader:
                opt.zero_grad()
                nn.functional.mse_loss(model(x.to(device)), y.to(device)).backward()
                opt.step()
            val = evaluate(model, eval_loader, device)  # leaves the model in eval mode
            if dist.get_rank() == 0:
                print(f"epoch {epoch} eval loss {val:.4f}")
                torch.save(model.module.state_dict(), "checkpoint.pt")
            dist.barrier()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
