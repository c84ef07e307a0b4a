# No functions, no __main__ guard: everything at module level.
import os
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

use_cuda = torch.cuda.is_available()
local_rank = int(os.environ.get("LOCAL_RANK", 0))
if use_cuda:
    torch.cuda.set_device(local_rank)
device = torch.device(f"cuda:{local_rank}" if use_cuda else "cpu")
dist.init_process_group("nccl" if use_cuda else "gloo")
rank, world = dist.get_rank(), dist.get_world_size()

try:
    torch.manual_seed(123)
    X = torch.randn(200, 8)
    Y = (X.sum(dim=1, keepdim=True) > 0).float()
    ds = TensorDataset(X, Y)
    sampler = DistributedSampler(ds, num_replicas=world, rank=rank, shuffle=True, seed=5)
    dl = DataLoader(ds, batch_size=20, sampler=sampler, num_workers=0, drop_last=False)

    net = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1)).to(device)
    net = DistributedDataParallel(net, device_ids=[local_rank] if use_cuda else None)
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    crit = nn.BCEWithLogitsLoss()

    for ep in range(3):
        sampler.set_epoch(ep)
        for xb, yb in dl:
            xb, yb = xb.to(device), yb.to(device)
            opt.zero_grad(set_to_none=True)
            crit(net(xb), yb).backward()
            opt.step()
        if rank == 0:
            print("epoch", ep, "done")
    if rank == 0:
        torch.save(net.module.state_dict(), "model_final.pt")
    dist.barrier()
finally:
    dist.destroy_process_group()
