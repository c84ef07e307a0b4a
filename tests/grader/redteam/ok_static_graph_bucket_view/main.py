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
    try:
        g = torch.Generator().manual_seed(0)
        ds = TensorDataset(torch.randn(256, 16, generator=g), torch.randint(0, 5, (256,), generator=g))
        sampler = DistributedSampler(ds)
        loader = DataLoader(ds, batch_size=32, sampler=sampler)
        torch.manual_seed(0)
        net = nn.Sequential(nn.Linear(16, 64), nn.LayerNorm(64), nn.ReLU(), nn.Linear(64, 5)).to(device)
        model = DDP(net, device_ids=[local] if cuda else None, static_graph=True,
                    gradient_as_bucket_view=True, bucket_cap_mb=1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
        for epoch in range(3):
            sampler.set_epoch(epoch)
            for xb, yb in loader:
                opt.zero_grad(set_to_none=False)
                nn.functional.cross_entropy(model(xb.to(device)), yb.to(device)).backward()
                opt.step()
            if dist.get_rank() == 0:
                torch.save(model.module.state_dict(), "checkpoint.pt")
            dist.barrier()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
