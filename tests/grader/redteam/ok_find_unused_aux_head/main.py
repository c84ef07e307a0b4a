import os
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 16), nn.ReLU())
        self.main_head = nn.Linear(16, 1)
        self.aux_head = nn.Linear(16, 3)  # only used for the (disabled) auxiliary task

    def forward(self, x, use_aux: bool = False):
        h = self.body(x)
        if use_aux:
            return self.main_head(h), self.aux_head(h)
        return self.main_head(h)


def main():
    cuda = torch.cuda.is_available()
    local = int(os.environ["LOCAL_RANK"])
    if cuda:
        torch.cuda.set_device(local)
    device = torch.device("cuda", local) if cuda else torch.device("cpu")
    dist.init_process_group("nccl" if cuda else "gloo")
    try:
        g = torch.Generator().manual_seed(0)
        ds = TensorDataset(torch.randn(200, 8, generator=g), torch.randn(200, 1, generator=g))
        sampler = DistributedSampler(ds)
        loader = DataLoader(ds, batch_size=20, sampler=sampler)
        torch.manual_seed(0)
        model = DDP(TwoHeads().to(device), device_ids=[local] if cuda else None,
                    find_unused_parameters=True)
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        for epoch in range(2):
            sampler.set_epoch(epoch)
            for xb, yb in loader:
                opt.zero_grad()
                loss = nn.functional.mse_loss(model(xb.to(device)), yb.to(device))
                loss.backward()
                opt.step()
            if dist.get_rank() == 0:
                torch.save(model.module.state_dict(), "two_heads.pt")
            dist.barrier()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
